"""Which capture a stored run has, and its explain object whatever the capture's kind.

A run recorded with ``--trace`` keeps a host kernel capture (``hooks.trace``, explained by
irqlab.explain.run) or, for a Xen run with a Linux dom0, a xentrace capture
(``hooks.xentrace``, explained by irqlab.xen.explain). ``irqlab explain`` and ``irqlab
report`` ask here, so neither needs to know which kinds exist.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from irqlab.store import StoreError
from irqlab.store.db import RunRow
from irqlab.trace.capture import TraceHook
from irqlab.xen.capture import XentraceHook

# The hooks store their facts under their names in the run's metadata.
XENTRACE_HOOK = XentraceHook.name
HOST_TRACE_HOOK = TraceHook.name
NET_PATH = "net"         # a host capture the net target recorded (TraceHook path_kind)


def capture_kind(run: RunRow) -> str | None:
    """``"xentrace"``, ``"net"`` (a host capture along a packet's path), ``"trace"``
    (host kernel, timer path) or None: what the run recorded and how it is explained."""
    hooks = (run.metadata or {}).get("hooks") or {}
    if hooks.get(XENTRACE_HOOK) is not None:
        return XENTRACE_HOOK
    host = hooks.get(HOST_TRACE_HOOK)
    if host is not None:
        return NET_PATH if host.get("path") == NET_PATH else HOST_TRACE_HOOK
    return None


def xentrace_path(run: RunRow) -> Path:
    """The run's xentrace capture (irqlab.xen.capture), or StoreError with the fix."""
    meta = ((run.metadata or {}).get("hooks") or {}).get(XENTRACE_HOOK) or {}
    path = Path(meta.get("file") or "")
    if not meta.get("file") or not path.exists():
        raise StoreError(f"run {run.run_id} has no xentrace capture ({path} missing): "
                         f"record one with `irqlab run --target xen --xen-dom0 linux "
                         f"--trace`")
    return path


def explain_json(store: Any, run: RunRow, threshold_ns: int | None = None) -> dict[str, Any]:
    """The ``{"type": "explain"}`` object of the samples above ``threshold_ns`` (default
    the run's threshold), from whichever capture the run has; StoreError when it has
    none or it cannot be read."""
    kind = capture_kind(run)
    if kind == XENTRACE_HOOK:
        from irqlab.explain.run import _samples
        from irqlab.xen.explain import as_json, explain_run
        try:
            res = explain_run(run, xentrace_path(run), _samples(store, run.run_id),
                              threshold_ns, None, None)
        except ValueError as exc:
            raise StoreError(str(exc)) from None
        return as_json(res)
    if kind == NET_PATH:
        return explain_net_json(store, run, threshold_ns, None, None)
    from irqlab.explain.run import as_json as host_json
    from irqlab.explain.run import explain_run as host_explain
    return host_json(host_explain(store, str(run.run_id), threshold_ns=threshold_ns))


def explain_net_json(store: Any, run: RunRow, threshold_ns: int | None, top: int | None,
                     sample: int | None) -> dict[str, Any]:
    """The explain object of a net run along the packet's path (irqlab.explain.netpath)."""
    from irqlab.explain.load import load_capture
    from irqlab.explain.netpath import as_json, explain_net_run
    from irqlab.explain.run import _samples, capture_path
    trace = load_capture(capture_path(store, run))
    try:
        return as_json(explain_net_run(run, trace, _samples(store, run.run_id), threshold_ns,
                                       top, sample))
    except ValueError as exc:
        raise StoreError(str(exc)) from None
