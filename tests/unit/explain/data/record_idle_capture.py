"""Records data/idle_exits_recorded.irqtrace.gz: 3 s of 1 ms sleeps traced in a private
instance (sched, irq, irq_vectors, hrtimer expiry), saved with irqlab's own archive format.
Run as root from the repository root: .venv/bin/python tests/unit/explain/data/record_idle_capture.py
"""
import io
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from irqlab.trace.formats import parse_header_page  # noqa: E402 (path set above)
from irqlab.trace.tracefs import Instance, Tracefs
from irqlab.trace.archive import write_archive, spool_chunk
from irqlab.trace.synth import header_page_text
from tests.unit.trace.test_ringbuf import _drain

fs = Tracefs()
page_header = parse_header_page(fs.read("events/header_page"))
inst = Instance(fs, f"irqlab-fixture-{os.getpid()}")
spool = io.BytesIO()
try:
    for ev in ("sched/sched_switch", "sched/sched_waking", "sched/sched_wakeup", "irq",
               "irq_vectors", "timer/hrtimer_expire_entry", "timer/hrtimer_expire_exit"):
        if (inst.path / "events" / ev / "enable").exists():
            inst.write(f"events/{ev}/enable", "1")
    for _ in range(3000):
        time.sleep(0.001)
    inst.write("tracing_on", "0")
    cpus = []
    for cpu in range(inst.cpu_count()):
        fd = os.open(inst.path / f"per_cpu/cpu{cpu}/trace_pipe_raw", os.O_RDONLY | os.O_NONBLOCK)
        chunks = []
        try:
            _drain(fd, page_header.page_size, chunks)
        finally:
            os.close(fd)
        spool_chunk(spool, cpu, b"".join(chunks))
        cpus.append(cpu)
    formats = {}
    for key in ("sched:sched_switch", "sched:sched_waking", "sched:sched_wakeup",
                "irq:irq_handler_entry", "irq:irq_handler_exit"):
        system, name = key.split(":")
        formats[key] = fs.read(f"events/{system}/{name}/format")
    for name in inst.events_of("irq_vectors"):
        formats[f"irq_vectors:{name}"] = inst.read(f"events/irq_vectors/{name}/format")
finally:
    print("leftover settings:", inst.close())
fs.close()
out = Path(__file__).with_name("idle_exits_recorded.irqtrace.gz")
n = write_archive(out, {"header_page": header_page_text(page_header), "formats": formats,
                        "cpus": cpus}, spool)
print(out, n)
