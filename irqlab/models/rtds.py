"""The worst-case wait of a periodic server: Xen's RTDS vCPU with period P and budget B.

A periodic resource Γ(Π, Θ) (Shin & Lee, "Periodic Resource Model for Compositional
Real-Time Guarantees", RTSS 2003, §3; also Easwaran, Anand & Lee, RTSS 2007) guarantees
Θ time units in every period Π but not *when* inside it. Its supply bound function

    sbf(t) = t - (k + 1)(Π - Θ)  if (k + 1)Π - 2Θ <= t <= (k + 1)Π - Θ,
             (k - 1)Θ            otherwise,   k = max(ceil((t - (Π - Θ)) / Π), 1)

is zero for every t up to 2(Π - Θ): the budget was served at the very start of one
period and is served at the very end of the next. That blackout, 2·(P − B), is the
longest an interrupt arriving at the worst moment can wait before its vCPU runs — the
figure Dario Faggioli works through in seed 000 (xen-devel, "IRQ latency measurements in
hypervisor", 2021: "having a latency which is ~2x of your period is ok"). A handler
that needs C of CPU time completes at worst (k + 1)(P − B) + C after its interrupt,
k = ceil(C / B) (the inverse of sbf).

Pure arithmetic in integer nanoseconds; RTDS's own granularity and the scheduler's
overhead are not modelled.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

MODEL_VERSION = 1
SOURCE = ("Shin & Lee, Periodic Resource Model for Compositional Real-Time Guarantees, "
          "RTSS 2003 (supply bound function; blackout 2(P-B))")


@dataclass(frozen=True)
class RtdsBound:
    period_ns: int
    budget_ns: int
    bandwidth: float               # B/P: the share of one pCPU the vCPU is guaranteed
    bound_ns: int                  # 2(P-B): longest interval with no service at all
    best_case_ns: int              # 0: the budget may be available the moment it fires
    handler_ns: int | None         # C, when given
    response_bound_ns: int | None  # (k+1)(P-B) + C, k = ceil(C/B)
    periods_for_handler: int | None  # k: budgets the handler needs

    def as_dict(self) -> dict[str, Any]:
        return {"type": "model", "version": MODEL_VERSION, "model": "rtds",
                **asdict(self), "source": SOURCE}


def sbf_ns(t_ns: int, period_ns: int, budget_ns: int) -> int:
    """Shin & Lee's supply bound function: guaranteed service in any window t."""
    gap = period_ns - budget_ns
    if t_ns <= gap:
        return 0
    k = max(-(-(t_ns - gap) // period_ns), 1)
    if (k + 1) * period_ns - 2 * budget_ns <= t_ns <= (k + 1) * period_ns - budget_ns:
        return t_ns - (k + 1) * gap
    return (k - 1) * budget_ns


def rtds_bound(period_ns: int, budget_ns: int, handler_ns: int | None = None) -> RtdsBound:
    """The model's figures; ValueError when the server makes no sense."""
    if period_ns <= 0 or budget_ns <= 0:
        raise ValueError("period and budget must be positive")
    if budget_ns > period_ns:
        raise ValueError(f"budget {budget_ns} ns exceeds period {period_ns} ns: a vCPU "
                         f"cannot get more than its whole period")
    if handler_ns is not None and handler_ns < 0:
        raise ValueError("handler time must not be negative")
    gap = period_ns - budget_ns
    k = resp = None
    if handler_ns is not None:
        k = max(-(-handler_ns // budget_ns), 1)
        resp = (k + 1) * gap + handler_ns
    return RtdsBound(period_ns, budget_ns, budget_ns / period_ns, 2 * gap, 0, handler_ns,
                     resp, k)
