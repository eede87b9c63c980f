"""Explain's set-up on string columns held as codes (task names, irq handler names:
ringbuf.Coded) gives what it gives on the strings: the completed switches (with inferred
rows whose names join the codes), each CPU's tasks and the IRQ intervals, on a stored
real capture whose idle exits went unrecorded."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from irqlab import native
from irqlab.explain import timeline
from irqlab.explain.load import Table, Trace, decode_capture
from irqlab.trace.archive import read_archive

CAPTURE = Path(__file__).parent / "data" / "idle_exit_unrecorded.irqtrace.gz"


def _both() -> tuple[Trace, Trace]:
    """(the capture decoded with coded columns, the same tables as plain strings). The
    header lists no threads: naming them (load.to_kernel_pids) would read the names."""
    assert native.lib() is not None, native.why_not()
    header, per_cpu = read_archive(CAPTURE)
    header = {k: v for k, v in header.items() if k not in ("vmm_threads", "peer_threads")}
    coded = decode_capture(header, per_cpu)
    header, per_cpu = read_archive(CAPTURE)
    plain = decode_capture(header, per_cpu)
    plain.tables = {n: Table(n, dict(t.cols)) for n, t in plain.tables.items()}
    return coded, plain


def test_switches_runs_and_irqs_from_codes_equal_those_from_strings():
    coded, plain = _both()
    sw = coded.t("sched_switch")
    assert sw.coded("next_comm") is not None and sw.coded("prev_comm") is not None
    assert coded.t("irq_handler_entry").coded("name") is not None
    s_c, s_p = timeline.complete_switches(coded), timeline.complete_switches(plain)
    assert s_c.coded("next_comm") is not None                  # still codes
    assert s_c["inferred"].any()                               # names of inferred rows
    assert list(s_c.cols) == list(s_p.cols)
    for k in s_p.cols:
        assert s_c[k].dtype == s_p[k].dtype and np.array_equal(s_c[k], s_p[k]), k
    s_c = timeline.complete_switches(coded)
    r_c, r_p = timeline.cpu_runs(coded, s_c), timeline.cpu_runs(plain, s_p)
    assert r_c.names is not None and r_p.names is None
    lo, hi = int(s_p["ts"][0]), int(s_p["ts"][-1])
    for cpu in r_p.ts:
        for a in np.linspace(lo, hi, 50).astype(np.int64).tolist():
            assert r_c.pieces(cpu, a, a + 3_000_000) == r_p.pieces(cpu, a, a + 3_000_000)
    for got, want in zip(timeline.irq_intervals(coded), timeline.irq_intervals(plain)):
        assert got.keys() == want.keys()
        for c in want:
            np.testing.assert_array_equal(got[c].start, want[c].start)
            np.testing.assert_array_equal(got[c].end, want[c].end)
            assert got[c].label.tolist() == want[c].label.tolist()
    assert coded.t("irq_handler_entry").coded("name") is not None   # never built
