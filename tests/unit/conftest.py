"""Real event formats of the running kernel (read from tracefs at test time), shared by
the trace and explain tests: one tracefs handle for the whole session."""

from __future__ import annotations

import os

import pytest

from irqlab.trace.formats import EventFormat, PageHeader, parse_format, parse_header_page
from irqlab.trace.tracefs import Tracefs, TraceError


@pytest.fixture(scope="session")
def tracefs():
    if os.geteuid() != 0:
        pytest.skip("tracefs needs root")
    try:
        fs = Tracefs()
    except TraceError as exc:
        pytest.skip(str(exc))
    yield fs
    fs.close()


@pytest.fixture(scope="session")
def kernel_formats(tracefs) -> dict[str, EventFormat]:
    out = {}
    for key in ("sched:sched_switch", "sched:sched_waking", "sched:sched_wakeup",
                "irq:irq_handler_entry", "irq:irq_handler_exit", "irq:softirq_entry",
                "irq:softirq_exit", "timer:hrtimer_start", "timer:hrtimer_expire_entry",
                "kvm:kvm_msr", "kvm:kvm_apic_accept_irq", "kvm:kvm_inj_virq",
                "kvm:kvm_entry", "kvm:kvm_vcpu_wakeup", "kvm:kvm_userspace_exit",
                "signal:signal_generate", "irq_vectors:local_timer_entry",
                "irq_vectors:local_timer_exit", "nmi:nmi_handler",
                "ftrace:print"):
        system, name = key.split(":")
        try:
            out[key] = parse_format(tracefs.read(f"events/{system}/{name}/format"), system)
        except OSError:
            continue
    return out


@pytest.fixture(scope="session")
def page_header(tracefs) -> PageHeader:
    return parse_header_page(tracefs.read("events/header_page"))
