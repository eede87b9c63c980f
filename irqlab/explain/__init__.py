"""``irqlab explain``: attribute each latency spike to its host-side cause.

- load.py      a stored capture decoded into typed event columns
- clock.py     guest ticks -> host trace clock, with an error bound
- timeline.py  per-thread states (running/runnable/blocked/stopped), per-CPU occupancy,
               hard-IRQ and softirq intervals
- attribute.py per-sample causes, KVM timer-path stages, aggregate culprits
- perfetto.py  Chrome/Perfetto JSON
"""
