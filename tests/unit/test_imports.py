"""The package's import graph: no import circle between files of irqlab/, and every
import follows the layer order of docs/design.md ("a module imports only from lines
above its own").

The graph is read from the source with ast; nothing is imported. Every import
statement is an edge, wherever it stands:

* module-level imports run while the module is imported;
* imports inside a function run at the first call; the start-up work
  (docs/design.md, "Start-up") defers heavy imports that way on purpose;
* imports under ``if TYPE_CHECKING:`` never run, but name what the module's signatures
  speak of.

All three count, for circles too. A circle of module-level imports breaks at import
time (``from x import name`` of a half-initialised module); a circle closed by a
function-level or TYPE_CHECKING import does not break today, but it is the same
two-way dependency, only hidden: the two files can no longer be read, tested or moved
apart, and moving the deferred import to the top (as a refactor might) makes it the
import-time kind. Such circles are removed by moving the shared definition down or by
a Protocol in the lower module (irqlab.store.percentiles.SampleStore), not by hiding
the import in a function. Each edge keeps ``module_level`` so a failure says which
kind it is.

Not seen: modules loaded by name (importlib.import_module), e.g. the CLI's commands
(irqlab.cli.main.COMMANDS) and the journal's undo kinds (irqlab.journal); those
name their modules in data, where a reader finds them.

Since every edge between two layers must point upward, a circle can only live inside
one layer (stats/, store/, cli/ ...).
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

# The tests here share one parse of every module (all_edges, cached): one worker runs
# them all (tests/conftest.py's groups), or each worker would parse the package again.
XDIST_GROUP = "imports"

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "irqlab"
DESIGN = ROOT / "docs" / "design.md"


@dataclass(frozen=True)
class Edge:
    source: str        # importing module, dotted (irqlab.stats.run)
    target: str        # imported module, dotted
    line: int
    module_level: bool


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The irqlab module a dotted name stands for (a module, or a name in one)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _imported(node: ast.Import | ast.ImportFrom, source: str, is_package: bool,
              modules: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = source if is_package else source.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}" if base else package
        # `from pkg import sub` imports the submodule pkg.sub when there is one.
        names = [f"{base}.{alias.name}" for alias in node.names] or [base]
    found = []
    for name in names:
        if not name.startswith("irqlab"):
            continue
        target = _resolve(name, modules)
        if target is not None and target != source:
            found.append(target)
    return found


def edges_of(source: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    out: list[Edge] = []

    def visit(node: ast.AST, module_level: bool, type_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for target in _imported(child, source, is_package, modules):
                    out.append(Edge(source, target, child.lineno,
                                    module_level and not type_only))
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, False, type_only)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    visit(ast.Module(body=[stmt], type_ignores=[]), module_level, True)
                for stmt in child.orelse:
                    visit(ast.Module(body=[stmt], type_ignores=[]), module_level, type_only)
            else:
                # Class bodies, if/try/with at module level run at import time.
                visit(child, module_level, type_only)

    visit(tree, True, False)
    return out


@functools.cache
def all_edges() -> tuple[Edge, ...]:
    """Every import of the package: parsed once for all the tests here (~300 files)."""
    modules = all_modules()
    return tuple(e for name, path in modules.items() for e in edges_of(name, path, modules))


def circles(edges: Sequence[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.source, set()).add(e.target)
        graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def design_layers() -> list[str]:
    """The paths of the layers list in docs/design.md, top (imported by all) first."""
    text = DESIGN.read_text()
    block = text.split("## Layers", 1)[1].split("```", 2)[1]
    return [m.group(1) for m in re.finditer(r"^(irqlab/\S*)", block, re.MULTILINE)]


def layer_of(module: str, layers: list[str]) -> int | None:
    """Index of the design.md line a module belongs to (the longest matching path)."""
    path = module.replace(".", "/")
    best: tuple[int, int] | None = None
    for i, layer in enumerate(layers):
        if layer.endswith("/"):
            hit = (path + "/").startswith(layer)
        else:
            hit = path + ".py" == layer
        if hit and (best is None or len(layer) > best[1]):
            best = (i, len(layer))
    return None if best is None else best[0]


def test_no_import_circle_between_files() -> None:
    edges = all_edges()
    found = circles(edges)
    lines = []
    for component in found:
        members = set(component)
        ties = sorted(f"{e.source} -> {e.target} (line {e.line}, "
                      f"{'module level' if e.module_level else 'deferred or type-only'})"
                      for e in edges if e.source in members and e.target in members)
        lines.append(" <-> ".join(component) + ":\n    " + "\n    ".join(ties))
    assert not found, "import circles:\n" + "\n".join(lines)


def test_every_module_has_a_layer_in_design_md() -> None:
    layers = design_layers()
    # The package root (irqlab/__init__.py) re-exports open_store lazily and sits
    # outside the layers: it imports irqlab.api only inside a function.
    missing = [m for m in all_modules() if m != "irqlab" and layer_of(m, layers) is None]
    assert not missing, f"modules with no line in docs/design.md's layers list: {missing}"


def test_imports_follow_the_layer_order_of_design_md() -> None:
    layers = design_layers()
    wrong = []
    for e in all_edges():
        if e.source == "irqlab":
            continue
        own, other = layer_of(e.source, layers), layer_of(e.target, layers)
        if own is None or other is None:
            continue  # reported by test_every_module_has_a_layer_in_design_md
        if other > own:
            wrong.append(f"{e.source}:{e.line} imports {e.target} "
                         f"({layers[other]} is below {layers[own]})")
    assert not wrong, "imports from a lower layer:\n" + "\n".join(sorted(wrong))


def test_the_checks_see_a_circle_and_an_upward_import() -> None:
    # The walker itself: a made-up graph with one circle and one clean chain.
    edges = [Edge("a", "b", 1, True), Edge("b", "a", 1, True), Edge("b", "c", 1, True)]
    assert circles(edges) == [["a", "b"]]
    layers = design_layers()
    assert layer_of("irqlab.stats.run", layers) < layer_of("irqlab.store.db", layers)
    assert layer_of("irqlab.cli.main", layers) == len(layers) - 1
