"""The C programs' link graph: no circle between the .c files of one program
(test_imports.py's rule for irqlab/, for probes/).

A program's files and flags are what its Makefile really runs (`make -n -B`, nothing
built in the tree); each .c file is compiled again into a temporary directory with those
flags and read with nm: file A depends on file B when A uses a symbol B defines (a
function called or a variable read or written). Two files that depend on each other,
even through others, are a circle: they cannot be read, tested or changed apart. A
program is layered one way instead, a header per layer (probes/native/netsend.h), and
the shared code sits below every program in lib/.

One use is not a dependency: a symbol A's own header declares for others to provide
(probes/guest/lib/probe.h's "provided by each architecture": arch_timer_arm_tick ...),
or a header that names itself a side of A's header (probes/guest/arm64/arch.h, "arm64
side of the probe interface (lib/probe.h)": irq_use_phys). A owns that contract and
the provider depends on A's header, as a Python Protocol in the lower module does
(test_imports.py); the arrow points down from the provider.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.unit.test_imports import Edge, circles

ROOT = Path(__file__).resolve().parents[2]
# Nothing host-wide (tests/conftest.py): it reads sources and objects; the C it reads
# says SCHED_FIFO, which put it on the host group's one worker.
XDIST_GROUP = ""
PROBE_DIRS = ("probes/native", "probes/guest", "probes/kvm-host")
_DEFINED = set("TDBRCVWG")       # nm -P types of a symbol a file defines for others


@dataclass
class Program:
    """One linked program: its output, its compiler, and each .c file's own flags."""

    output: str
    compiler: str
    sources: dict[str, list[str]] = field(default_factory=dict)   # path -> compile flags


def _commands(make_dir: Path) -> list[list[str]]:
    """The compiler commands `make -n -B` prints in ``make_dir`` (continuations joined)."""
    out = subprocess.run(["make", "-n", "-B", "--no-print-directory"], cwd=make_dir,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    commands = []
    for line in out.replace("\\\n", " ").splitlines():
        argv = shlex.split(line)
        if argv and argv[0].endswith(("gcc", "cc", "clang")) and "-o" in argv:
            commands.append(argv)
    return commands


def _flags(argv: list[str]) -> list[str]:
    """The compile flags of a command: its argv without the compiler, -o, inputs,
    link-only options and -include (the generated build id: not built by `make -n`)."""
    flags, skip = [], False
    for arg in argv[1:]:
        if skip:
            skip = False
        elif arg in ("-o", "-include"):
            skip = True
        elif arg.endswith((".c", ".o", ".S")) or arg in ("-c", "-static") \
                or arg.startswith("-Wl,"):
            continue
        else:
            flags.append(arg)
    return flags


def programs_of(make_dir: Path) -> list[Program]:
    """Every program the Makefile in ``make_dir`` links, with its .c files."""
    compiled: dict[str, tuple[str, list[str]]] = {}   # object -> (source, flags)
    programs = []
    for argv in _commands(make_dir):
        output = argv[argv.index("-o") + 1]
        inputs = [a for a in argv[1:] if a.endswith((".c", ".o", ".S")) and a != output]
        if "-c" in argv:
            compiled[output] = (inputs[0], _flags(argv))
            continue
        program = Program(output, argv[0])
        for item in inputs:
            if item.endswith(".c"):
                program.sources[item] = _flags(argv)
            elif item in compiled and compiled[item][0].endswith(".c"):
                program.sources[compiled[item][0]] = compiled[item][1]
        programs.append(program)
    return programs


_SYMBOLS: dict[tuple[str, ...], tuple[set[str], set[str]]] = {}


def _symbols(make_dir: Path, program: Program, source: str,
             tmp: Path) -> tuple[set[str], set[str]]:
    """(defined, used) global symbols of one .c file, compiled with its own flags (once
    per compiler, flags and file: programs share lib/)."""
    key = (str(make_dir), program.compiler, *program.sources[source], source)
    if key not in _SYMBOLS:
        _SYMBOLS[key] = _compiled_symbols(make_dir, program, source, tmp)
    return _SYMBOLS[key]


def _compiled_symbols(make_dir: Path, program: Program, source: str,
                      tmp: Path) -> tuple[set[str], set[str]]:
    obj = tmp / f"{abs(hash((make_dir, program.compiler, source, *program.sources[source])))}.o"
    subprocess.run([program.compiler, *program.sources[source], "-O0", "-g0", "-c", "-o",
                    str(obj), source], cwd=make_dir, check=True, timeout=120,
                   capture_output=True)
    nm = shutil.which(program.compiler.replace("gcc", "nm")) or "nm"
    defined, used = set(), set()
    for line in subprocess.run([nm, "-P", str(obj)], capture_output=True, text=True,
                               check=True, timeout=60).stdout.splitlines():
        name, kind = line.split()[:2]
        if kind == "U":
            used.add(name)
        elif kind in _DEFINED:
            defined.add(name)
    return defined, used


def _own_contract(make_dir: Path, source: str) -> str:
    """The text of the header named after ``source`` (lib/probe.c: lib/probe.h) and of
    the headers whose opening comment names it as the interface they are a side of."""
    header = (make_dir / source).with_suffix(".h")
    if not header.is_file():
        return ""
    own = header.relative_to(make_dir).as_posix()
    sides = [h.read_text() for h in sorted(make_dir.rglob("*.h"))
             if f"interface ({own})" in h.read_text()[:400]]
    return "\n".join([header.read_text(), *sides])


def program_edges(make_dir: Path, program: Program, tmp: Path) -> list[Edge]:
    """File -> file edges of one program: a symbol one file uses and another defines,
    unless the user's own header declares it (its contract, provided from above)."""
    with ThreadPoolExecutor(max_workers=4) as pool:     # compilers wait on the disk too
        found = pool.map(lambda src: _symbols(make_dir, program, src, tmp), program.sources)
        symbols = dict(zip(program.sources, found))
    owner = {name: src for src, (defined, _) in symbols.items() for name in defined}
    edges = []
    for src, (_, used) in symbols.items():
        contract = _own_contract(make_dir, src)
        for name in sorted(used):
            if name not in owner or owner[name] == src:
                continue
            if re.search(rf"\b{re.escape(name)}\b", contract):
                continue
            edges.append(Edge(src, owner[name], 0, True))
    return edges


def _all_programs() -> list[tuple[Path, Program]]:
    """Every program with a compiler here, once per set of files (probes/native's arm64
    build links the same files as its host build)."""
    found, seen = [], set()
    for rel in PROBE_DIRS:
        make_dir = ROOT / rel
        for program in programs_of(make_dir):
            files = (rel, *sorted(program.sources))
            if shutil.which(program.compiler) and program.sources and files not in seen:
                seen.add(files)
                found.append((make_dir, program))
    return found


@pytest.mark.slow      # compiles every probe file again: 10-20 s on a loaded host
def test_no_circle_between_the_c_files_of_a_program(tmp_path: Path) -> None:
    programs = _all_programs()
    assert any(p.output.endswith("irqlab-netsend") for _, p in programs), \
        "the sender's link line was not found in probes/native's Makefile"
    wrong = []
    for make_dir, program in programs:
        edges = program_edges(make_dir, program, tmp_path)
        for component in circles(edges):
            ties = sorted({f"{e.source} -> {e.target}" for e in edges
                           if e.source in component and e.target in component})
            wrong.append(f"{make_dir.name}/{program.output}: " + ", ".join(ties))
    assert not wrong, "C files calling each other:\n" + "\n".join(wrong)


def test_the_check_sees_two_files_calling_each_other(tmp_path: Path) -> None:
    # The walker itself, on a made-up program of three files: a and b call each other,
    # c only calls down.
    (tmp_path / "a.c").write_text("int b(void);\nint a(void) { return b(); }\n"
                                  "int main(void) { return a(); }\n")
    (tmp_path / "b.c").write_text("int a(void);\nint c(void);\n"
                                  "int b(void) { return c() ? a() : 0; }\n")
    (tmp_path / "c.c").write_text("int c(void) { return 0; }\n")
    (tmp_path / "Makefile").write_text("prog: a.c b.c c.c\n\tgcc -O2 -o prog a.c b.c c.c\n")
    [program] = programs_of(tmp_path)
    assert sorted(program.sources) == ["a.c", "b.c", "c.c"]
    out = tmp_path / "objects"
    out.mkdir()
    assert circles(program_edges(tmp_path, program, out)) == [["a.c", "b.c"]]


@pytest.mark.parametrize("program", ["hog.c", "echo.c"])
def test_the_guest_programs_stand_on_lib(program: str) -> None:
    # hog and echo take pinning, SCHED_FIFO and mlockall from lib/rt.c, numbers from
    # lib/cli.c (issue 43): their own copies are gone.
    text = (ROOT / "probes/native" / program).read_text()
    assert '#include "lib/rt.h"' in text
    for own in ("mlockall(", "sched_setscheduler(", "sched_setaffinity(", "atoi("):
        assert own not in text, f"{program} calls {own} itself"
