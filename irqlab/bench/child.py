"""A benchmark's timed child process: one job, its seconds and its own peak memory, as
one JSON line (on stderr for the CLI, whose stdout is the command's own output).

    python -m irqlab.bench.child irqlab ARGS...    irqlab ARGS in this process
    python -m irqlab.bench.child read-csv LOG      DuckDB read_csv + median of LOG
    python -m irqlab.bench.child csv-table LOG DB  LOG stored as a DuckDB table in DB

With IRQLAB_BENCH_IN_MEMORY=1 the CLI reads every run whole (the pre-streaming
behaviour, the baseline of `irqlab bench compare`). A module, not a code string, so that
what a benchmark times is code a reader finds and the import graph sees.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time

# The log's columns, as `irqlab bench import` writes them ("latency: N").
_LOG_COLUMNS = "delim=' ', header=false, columns={'tag': 'VARCHAR', 'v': 'BIGINT'}"


def peak_mib() -> float:
    """Peak resident memory of this process: VmHWM (ru_maxrss would carry the parent's
    peak over the exec on Linux)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# This process's entry: the CLI, named in data as pyproject's console script names it.
# The CLI imports this package (cmd_bench), so the child loads it by name: the arrow
# cli -> bench stays the only one between them, and the CLI runs in a process of its own.
_CLI_MODULE = "irqlab.cli.main"


def _irqlab(args: list[str]) -> int:
    if os.environ.get("IRQLAB_BENCH_IN_MEMORY") == "1":
        import irqlab.reports.data as data
        data.IN_MEMORY_SAMPLES = 1 << 62
    cli = importlib.import_module(_CLI_MODULE)

    t0, cpu0 = time.perf_counter(), time.process_time()
    code = cli.main(args)
    sys.stdout.flush()
    # CPU seconds of every thread of the process beside the wall time: steadier than it
    # on a shared machine (bench report).
    print(json.dumps({"seconds": time.perf_counter() - t0, "code": code,
                      "cpu_s": time.process_time() - cpu0,
                      "peak_mib": peak_mib()}), file=sys.stderr)
    return 0


def _read_csv(log: str) -> int:
    import duckdb

    t0 = time.perf_counter()
    con = duckdb.connect()
    p50 = con.execute(f"SELECT quantile_disc(v, 0.5) FROM read_csv(?, {_LOG_COLUMNS})",
                      [log]).fetchall()[0][0]
    print(json.dumps({"seconds": time.perf_counter() - t0, "p50": p50,
                      "peak_mib": peak_mib()}))
    return 0


def _csv_table(log: str, db: str) -> int:
    """The same file stored by DuckDB itself (a table of its rows, written to a database
    file and checkpointed): the floor of an import that keeps every sample, which
    read_csv alone is not."""
    import duckdb

    t0 = time.perf_counter()
    con = duckdb.connect(db)
    con.execute("CREATE TABLE s AS SELECT row_number() OVER () AS seq, v FROM "
                f"read_csv(?, {_LOG_COLUMNS})", [log])
    con.execute("CHECKPOINT")
    con.close()
    print(json.dumps({"seconds": time.perf_counter() - t0, "peak_mib": peak_mib()}))
    return 0


def main(argv: list[str]) -> int:
    job, args = argv[0], argv[1:]
    if job == "irqlab":
        return _irqlab(args)
    if job == "read-csv":
        return _read_csv(*args)
    if job == "csv-table":
        return _csv_table(*args)
    print(f"unknown job {job!r}: one of irqlab, read-csv, csv-table", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
