"""The explainers, one per capture kind, behind one interface (irqlab.explain.seam).

Adding an explainer: write irqlab/explain/<name>.py with a class that has ``kind``,
``title``, ``outputs``, ``outputs_hint`` and ``explain``, record its ``kind`` in the
capture hook's metadata, then add one line to EXPLAINERS below. ``irqlab explain`` and
``irqlab report`` name no kind.
"""

from __future__ import annotations

from typing import Any

from irqlab.explain.host import HostVcpuExplainer
from irqlab.explain.kvm_arm64 import KvmArm64Explainer
from irqlab.explain.linux_guest import LinuxGuestExplainer
from irqlab.explain.native import NativeExplainer
from irqlab.explain.netpath import NetRunExplainer
from irqlab.explain.noise import NoiseExplainer
from irqlab.explain.seam import CaptureExplainer, Request, Silent, hook_meta
from irqlab.explain.xen import XentraceExplainer
from irqlab.store import Store, StoreError
from irqlab.store.db import RunRow

# The registry: capture kind -> its explainer.
EXPLAINERS: dict[str, CaptureExplainer] = {e.kind: e for e in (
    HostVcpuExplainer(),
    XentraceExplainer(),
    NetRunExplainer(),
    NativeExplainer(),
    LinuxGuestExplainer(),
    KvmArm64Explainer(),
    NoiseExplainer(),
)}

# The capture hooks (irqlab.trace.capture.TraceHook, irqlab.xen.capture.XentraceHook)
# keep their facts under these names in the run's metadata.
CAPTURE_HOOKS = ("xentrace", "trace")


def capture_kind(run: RunRow) -> str | None:
    """The kind of capture the run recorded (an EXPLAINERS key), or None. Runs recorded
    before hooks wrote ``kind`` (2026-11-26) are told apart as explain did then."""
    hooks = (run.metadata or {}).get("hooks") or {}
    for hook in CAPTURE_HOOKS:
        if hooks.get(hook) is None:
            continue
        meta = hook_meta(run, hook)
        if meta.get("kind"):
            return str(meta["kind"])
        if hook == "xentrace":
            return "xentrace"
        if meta.get("path") == "net":
            return "net-path"
        return _KIND_BEFORE_KINDS.get(run.target, "host-vcpu")
    return None


# Stored runs of before 2026-11-26 carry no capture kind: the one their target's capture
# had then, by the target name stored with them (a fact of old records, not behaviour of
# the target: no target records without a kind today). The native explainer refuses those
# captures (x86-tsc clock) with one line saying to record again with --trace.
_KIND_BEFORE_KINDS = {"native": "native"}


def explainer_for(run: RunRow) -> CaptureExplainer:
    """The run's explainer, or StoreError saying it cannot be explained. A run whose
    metadata names no capture is read as a host capture beside the database, as explain
    always did (irqlab.explain.run.capture_path says so when there is none)."""
    kind = capture_kind(run) or HostVcpuExplainer.kind
    explainer = EXPLAINERS.get(kind)
    if explainer is None:
        raise StoreError(f"run {run.run_id}'s capture is of kind {kind!r}, which this "
                         f"irqlab cannot explain (it knows {', '.join(EXPLAINERS)}); "
                         f"upgrade irqlab")
    return explainer


def explain_json(store: Store, run: RunRow, threshold_ns: int | None = None
                 ) -> dict[str, Any]:
    """The ``{"type": "explain"}`` object of the samples above ``threshold_ns`` (default
    the run's threshold), whatever the capture; StoreError when there is none or it
    cannot be read (irqlab report)."""
    return explainer_for(run).explain(store, run, Request(threshold_ns=threshold_ns),
                                      Silent()).js
