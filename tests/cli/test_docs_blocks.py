"""Every fenced block of README.md and docs/*.md runs, as a reader would paste it, or
says on the line before it why not (issue 32: "a test executes every code block in
docs/"; docs/api.md's example needed pandas, which only the test extra installs).

What a block is (its info string and the marker on the nearest non-blank line before it):

* ``<!-- not run: REASON -->``: not run, for the stated reason (output, a synopsis,
  needs a Xen host, needs hardware, installs packages ...). Nothing is skipped silently:
  an unmarked block that is not one of the kinds below fails the test.
* ``<!-- exit 0|1: REASON -->``: run; these exit codes are expected (a gate such as
  ``irqlab check`` whose limits decide).
* ``<!-- runnable -->`` (the older marker): run.
* ``sh``/``bash``/``shell``: every line is a command; ``console`` or a bare fence holding
  ``$ `` lines: a transcript, its ``$ `` lines are the commands (continued by ``\\``),
  the rest is output. A file's shell blocks run in their order (later blocks use runs
  made by earlier ones) with bash -e, in a temp dir holding symlinks to the checkout's
  entries (so ``tests/fixtures/...`` resolves), ``irqlab`` on PATH, HOME and every
  ``IRQLAB_*`` location in the temp dir and ``/tmp/`` in a command mapped into it.
* ``toml`` whose first line is ``# /tmp/NAME.toml``: a scenario file; written there
  and checked with ``irqlab matrix FILE --dry-run``.
* ``python``: a fresh interpreter whose HOME holds a store with one run at the default
  path (~/.local/share/irqlab/irqlab.duckdb) and whose working directory holds DIR, an
  ``irqlab export --parquet`` of it; ``import pandas`` and ``import polars`` fail there
  (the default install has neither).
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from irqlab.store import Store
from tests.conftest import call_cli
from tests.unit.reports._runs import add_run, latencies

ROOT = Path(__file__).parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
VENV_BIN = Path(sys.executable).parent
FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
NOT_RUN = re.compile(r"<!--\s*not run:\s*(\S.*?)\s*-->")
EXIT = re.compile(r"<!--\s*exit\s+([\d|]+):\s*(\S.*?)\s*-->")
RUNNABLE = "<!-- runnable -->"
SCENARIO = re.compile(r"#\s*(/tmp/\S+\.toml)\s*$")
SHELL_LANGS = {"sh", "bash", "shell"}
# What the default install lacks: the block fails if it imports them.
# (a finder that says "no module named", as Python does when a package is absent)
NOT_INSTALLED = """import sys
class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pandas", "polars"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _Absent())
"""


@dataclass(frozen=True)
class Block:
    doc: str           # file name, e.g. README.md
    line: int          # line of the opening fence (1-based)
    lang: str          # the info string ("" for a bare fence)
    body: str
    marker: str        # the nearest non-blank line before the fence, if a comment

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def not_run(self) -> str | None:
        m = NOT_RUN.search(self.marker)
        return m.group(1) if m else None

    @property
    def exits(self) -> set[int]:
        m = EXIT.search(self.marker)
        return {int(c) for c in m.group(1).split("|") if c} if m else {0}

    @property
    def kind(self) -> str | None:
        """How the block runs: shell, console, python, scenario; None: it cannot."""
        lines = self.body.splitlines()
        if self.lang in SHELL_LANGS:
            return "shell"
        if self.lang == "console" or (self.lang == "" and
                                      any(ln.startswith("$ ") for ln in lines)):
            return "console"
        if self.lang == "python":
            return "python"
        if self.lang == "toml" and lines and SCENARIO.match(lines[0]):
            return "scenario"
        return None


def _blocks(path: Path) -> list[Block]:
    out: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, start = m.group(1), i
        end = next((j for j in range(i + 1, len(lines))
                    if lines[j].strip().startswith(fence) and
                    lines[j].strip().strip(fence[0]) == ""), len(lines))
        before = next((ln.strip() for ln in reversed(lines[:start]) if ln.strip()), "")
        out.append(Block(path.name, start + 1, m.group(2), "\n".join(lines[start + 1:end]),
                         before if before.startswith("<!--") else ""))
        i = end + 1
    return out


BLOCKS = [b for path in DOCS for b in _blocks(path)]
RUN = [b for b in BLOCKS if b.not_run is None]


def test_every_block_runs_or_says_why_not():
    unmarked = [f"{b.where}: ```{b.lang} block neither runs (sh, console, python, "
                f"a '# /tmp/NAME.toml' scenario) nor is marked <!-- not run: WHY -->"
                for b in RUN if b.kind is None]
    assert not unmarked, "\n".join(unmarked)
    assert len(BLOCKS) >= 20, "the fence parser lost blocks"


def test_api_examples_run():
    # Every Python block of docs/api.md runs: none can rot unseen.
    api = [b for b in BLOCKS if b.doc == "api.md" and b.lang == "python"]
    assert api and all(b in RUN for b in api)


# ---------------------------------------------------------------- shell blocks

def _commands(block: Block) -> str:
    if block.kind == "shell":
        return block.body
    cmds: list[str] = []
    more = False
    for ln in block.body.splitlines():
        if ln.startswith("$ ") or more:
            cmds.append(ln[2:] if ln.startswith("$ ") and not more else ln)
            more = ln.rstrip().endswith("\\")
    return "\n".join(cmds)


def _workdir(tmp: Path) -> tuple[Path, dict[str, str]]:
    """A directory that looks like the checkout, and an environment whose every
    irqlab location is under tmp (nothing the test runs touches the real store)."""
    work = tmp / "work"
    work.mkdir()
    for entry in ROOT.iterdir():
        if entry.name != ".git":
            (work / entry.name).symlink_to(entry)
    home = tmp / "home"
    home.mkdir()
    env = {"PATH": f"{VENV_BIN}:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(home),
           "LANG": "C.UTF-8", "TMPDIR": str(tmp),
           "IRQLAB_DB": str(tmp / "irqlab.duckdb"),
           "IRQLAB_STATE_DIR": str(tmp / "state"),
           "IRQLAB_SAMPLES_DIR": str(tmp / "samples")}
    return work, env


def _run_block(block: Block, work: Path, env: dict[str, str], tmp: Path) -> str | None:
    """None when the block behaved as documented, else what went wrong."""
    if block.kind == "scenario":
        first = block.body.partition("\n")[0]
        path = Path(SCENARIO.match(first).group(1).replace("/tmp/", f"{tmp}/", 1))
        path.write_text(block.body + "\n")
        script = f"irqlab matrix {path} --dry-run"
    else:
        script = _commands(block).replace("/tmp/", f"{tmp}/")
    proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=work,
                          env=env, capture_output=True, text=True, timeout=180)
    if proc.returncode in block.exits:
        return None
    return (f"{block.where}: exit {proc.returncode}, expected {sorted(block.exits)}\n"
            f"$ {script}\n{proc.stdout[-1500:]}{proc.stderr[-1500:]}")


SHELL_DOCS = sorted({b.doc for b in RUN if b.kind in ("shell", "console", "scenario")})


@pytest.mark.slow
@pytest.mark.parametrize("doc", SHELL_DOCS)
def test_shell_blocks_run(tmp_path, doc):
    work, env = _workdir(tmp_path)
    blocks = [b for b in RUN if b.doc == doc and b.kind in ("shell", "console", "scenario")]
    for block in blocks:   # in order, and stop at the first: later ones may need it
        problem = _run_block(block, work, env, tmp_path)
        assert problem is None, problem


# --------------------------------------------------------------- python blocks

PYTHON = [b for b in RUN if b.kind == "python"]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("home")
    db = home / ".local" / "share" / "irqlab" / "irqlab.duckdb"
    db.parent.mkdir(parents=True)
    with Store(db) as st:
        add_run(st, "docs", latencies("ramp", 1000))
    res = call_cli(["export", "docs", "--parquet", str(home / "DIR")], db)
    assert res.code == 0, res.stderr
    return home


@pytest.mark.parametrize("block", PYTHON, ids=[b.where for b in PYTHON])
def test_python_block_runs(home, block):
    proc = subprocess.run([sys.executable, "-c", NOT_INSTALLED + block.body], cwd=home,
                          env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode in block.exits, f"{block.where}:\n{proc.stderr[-2000:]}"
    assert proc.stdout.strip(), f"{block.where} printed nothing"


def test_a_broken_or_unmarked_block_is_caught(tmp_path):
    # The mechanism itself: a transcript whose command fails is reported with its exit
    # code; an expected exit is accepted; a bare block without "$ " lines cannot run.
    work, env = _workdir(tmp_path)
    broken = Block("x.md", 1, "", "$ irqlab run --duratoin 1s\nerror output", "")
    assert "exit 2, expected [0]" in _run_block(broken, work, env, tmp_path)
    gate = Block("x.md", 1, "console", "$ irqlab run --duratoin 1s", "<!-- exit 2: bad -->")
    assert _run_block(gate, work, env, tmp_path) is None
    assert Block("x.md", 1, "", "a | b", "").kind is None
    assert Block("x.md", 1, "", "", "<!-- not run: output -->").not_run == "output"
