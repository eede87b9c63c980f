"""``irqlab bench startup``: how long the CLI takes to answer, against importing DuckDB.

Each figure is the wall time of a fresh process, as a shell starts it (fork, exec, the
interpreter, irqlab's imports, the command, exit): `irqlab --version`, `--help`, `list`
and `show RUN` on a small temporary store (one imported run of 10,000 samples), and
`completion bash` (the shell completion call). The baseline is `python -c 'import
duckdb'` in the same rounds: the least a command that reads the store must import.
`python -c pass` is measured too, as the interpreter's own floor.

Every round starts each command once, in an order rotated by one each round, so a load
that comes and goes (other jobs on the machine) hits every command alike; the figures
are the median of the rounds, with min and max (issue 28's goals: `--version` and
`--help` <= 150 ms; `list`/`show` <= 1.5 x the baseline).

Every process runs with its bytecode compiled, as an installed package's is (pip compiles
it at install): PYTHONDONTWRITEBYTECODE is dropped from their environment and the
bytecode goes to a temporary PYTHONPYCACHEPREFIX, written by one round that is not
counted. Without that, in a checkout whose .pyc files are older than its sources and a
shell that sets PYTHONDONTWRITEBYTECODE, every start compiled irqlab's edited modules
from source (DuckDB's, compiled at install, never), ~0.2 x of the ratio.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from irqlab.bench import irqlab_argv

_SAMPLES = 10_000                    # the small store's one run
_BASELINE = "import duckdb"
GOAL_MS = 150.0                      # --version and --help, issue 28
GOAL_RATIO = 1.5                     # list and show against the baseline, issue 28


def _commands(db: Path) -> dict[str, list[str]]:
    """Name -> argv of every process measured (irqlab's and the two references)."""
    irqlab = irqlab_argv()
    return {"python -c pass": [sys.executable, "-c", "pass"],
            "baseline": [sys.executable, "-c", _BASELINE],
            "--version": [*irqlab, "--version"],
            "--help": [*irqlab, "--help"],
            "list": [*irqlab, "list", "--db", str(db)],
            "show": [*irqlab, "show", "1", "--db", str(db)],
            "completion": [*irqlab, "completion", "bash"]}


def _compiled_env(tmp: Path) -> dict[str, str]:
    """The measured processes' environment: bytecode written to (and read from) a
    cache of the bench's own, whatever the caller's setting (see the module's doc)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    return env


def _cpu_s() -> float:
    """CPU time (user + system) of this process's reaped children so far."""
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def _run_ms(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Milliseconds from starting ``argv`` to its exit, and the CPU time (user + system)
    it used; RuntimeError when it fails (a figure of a command that did not answer would
    be meaningless). CPU time counts no waiting for a core, so other jobs on the machine
    move it much less than the wall time (the processes run one at a time, so the
    children's total grows by this one's only)."""
    cpu0 = _cpu_s()
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, timeout=120, env=env)
    elapsed = (time.perf_counter() - t0) * 1e3
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[3:] or argv)} exited {proc.returncode}: "
                           f"{proc.stderr.strip()[-300:]}")
    return elapsed, (_cpu_s() - cpu0) * 1e3


def _small_store(tmp: Path) -> Path:
    """A store of one run imported from a generated tscdeadline log, by `irqlab import`."""
    from irqlab.bench.compare import write_log

    log, db = tmp / "startup.txt", tmp / "startup.duckdb"
    write_log(log, _SAMPLES)
    subprocess.run([*irqlab_argv(), "import", "tscdeadline", str(log),
                    "--tick-hz", "2400000000", "--db", str(db), "--json"],
                   check=True, stdout=subprocess.DEVNULL, timeout=300)
    return db


def measure(rounds: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per command, its wall time in ms in each of ``rounds`` rounds, and its CPU time."""
    with tempfile.TemporaryDirectory() as tmp:
        commands = _commands(_small_store(Path(tmp)))
        env = _compiled_env(Path(tmp))
        names = list(commands)
        for name in names:                  # not counted: compiles the bytecode
            _run_ms(commands[name], env)
        times: dict[str, list[float]] = {name: [] for name in names}
        cpu: dict[str, list[float]] = {name: [] for name in names}
        for i in range(rounds):
            for name in names[i % len(names):] + names[:i % len(names)]:
                wall_ms, cpu_ms = _run_ms(commands[name], env)
                times[name].append(wall_ms)
                cpu[name].append(cpu_ms)
    return times, cpu


def _goal(name: str, median_ms: float, baseline_ms: float) -> dict[str, Any]:
    if name in ("--version", "--help"):
        return {"goal_ms": GOAL_MS, "met": bool(median_ms <= GOAL_MS)}
    if name in ("list", "show"):
        return {"goal_ratio": GOAL_RATIO, "met": bool(median_ms <= GOAL_RATIO * baseline_ms)}
    return {}


def bench_startup(rounds: int = 7) -> list[dict[str, Any]]:
    """One figure per command (median ms of ``rounds``; min, max, the baseline and the
    ratio median / baseline median), and one for the baseline itself."""
    times, cpu = measure(max(1, rounds))
    base = statistics.median(times["baseline"])
    cpu_base = statistics.median(cpu["baseline"])
    floor = statistics.median(times["python -c pass"])
    figures = []
    for name, values in times.items():
        med = statistics.median(values)
        figure: dict[str, Any] = {
            "name": f"startup {name}", "value": med, "unit": "ms",
            "min_ms": min(values), "max_ms": max(values), "rounds_ms": values,
            "rounds": len(values), "python_ms": floor,
            # CPU time (user + system): steadier than wall time on a shared machine.
            "cpu_ms": statistics.median(cpu[name]), "cpu_rounds_ms": cpu[name]}
        if name == "baseline":
            figure["command"] = f"python -c '{_BASELINE}'"
        elif name != "python -c pass":
            figure.update({"baseline": base, "baseline_name": f"python -c '{_BASELINE}'",
                           "ratio": med / base, "cpu_ratio": figure["cpu_ms"] / cpu_base,
                           **_goal(name, med, base)})
        figure["text"] = _text(figure)
        figures.append(figure)
    return figures


def _text(f: dict[str, Any]) -> str:
    """The human line: median (min-max, rounds), ratio to the baseline, the goal."""
    line = (f"{f['name']}: {f['value']:.0f} ms median (min {f['min_ms']:.0f}, max "
            f"{f['max_ms']:.0f}; {f['rounds']} rounds)")
    if "ratio" in f:
        line += f", {f['ratio']:.2f} x baseline ({f['baseline']:.0f} ms)"
    line += f"; CPU {f['cpu_ms']:.0f} ms" + (f" ({f['cpu_ratio']:.2f} x)" if "cpu_ratio" in f
                                             else "")
    if "goal_ms" in f:
        line += f"; goal <= {f['goal_ms']:.0f} ms: {'met' if f['met'] else 'NOT met'}"
    elif "goal_ratio" in f:
        line += (f"; goal <= {f['goal_ratio']} x baseline: "
                 f"{'met' if f['met'] else 'NOT met'}")
    elif "command" in f:
        line += f" = {f['command']}"
    return line
