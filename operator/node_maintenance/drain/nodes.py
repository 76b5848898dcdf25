"""The Node side of a maintenance: who holds the node, under which policy, whether it was cordoned or tainted before,
our taint.

The holder, the policy it was taken under, the earlier schedulability and an earlier drain taint are recorded on the
Node itself, so the state survives operator restarts and a second NodeMaintenance for the same node can see the node
is taken. The policy recorded keeps pacing and ruling the drain when the node's labels, or the policy's selector,
change while it is held: a node relabelled out of its pool does not escape the limits it was taken under.
Pure functions build the patches; each carries the node's resourceVersion, so a patch against a node
that changed meanwhile is refused and decided again on fresh state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from node_maintenance.api import GROUP
from node_maintenance.coordination import remediation

HOLDER = f"{GROUP}/holder"
POLICY = f"{GROUP}/policy"  # the NodeMaintenancePolicy that governed the holder when it took the node
WAS_UNSCHEDULABLE = f"{GROUP}/was-unschedulable"
WAS_TAINTED = f"{GROUP}/was-tainted"  # the drain taint was on the node before: it stays when the node is given back
FENCE = f"{GROUP}/fence"  # set, then cleared, by a deletion that finds the node not its own (fence_patch)
TAINT = {"key": "kubevirt.io/drain", "effect": "NoSchedule"}


def slim(node: dict[str, Any]) -> dict[str, Any]:
    """What a drain reads of its node: identity and version (its patches carry it), labels, annotations,
    schedulability, taints and readiness. The image list, addresses and capacities, most of a Node's size, go."""
    meta, spec = node.get("metadata") or {}, node.get("spec") or {}
    ready = [{"type": "Ready", "status": c.get("status")} for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
    return {"metadata": {k: meta[k] for k in ("name", "uid", "resourceVersion", "labels", "annotations") if k in meta},
            "spec": {k: spec[k] for k in ("unschedulable", "taints") if k in spec}, "status": {"conditions": ready}}


def holder_of(node: dict[str, Any]) -> str | None:
    return (node.get("metadata", {}).get("annotations") or {}).get(HOLDER)


def live_holder(node: Mapping[str, Any] | None, exists: Callable[[str], bool]) -> str | None:
    """The node's holder when that NodeMaintenance exists (``exists``, by name): one whose finalizer was removed by
    hand left its record behind and holds nothing, so a maintenance may take the node over."""
    holder = holder_of(dict(node)) if node is not None else None
    return holder if holder is not None and exists(holder) else None


def policy_of(node: dict[str, Any]) -> str | None:
    """The policy the node's holder took it under; None when nobody holds it, or it was taken under none."""
    annotations = node.get("metadata", {}).get("annotations") or {}
    return annotations.get(POLICY) if annotations.get(HOLDER) else None


def _taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    return list(node.get("spec", {}).get("taints") or [])


def has_taint(node: dict[str, Any]) -> bool:
    return any(t.get("key") == TAINT["key"] and t.get("effect") == TAINT["effect"] for t in _taints(node))


def begin_patch(node: dict[str, Any], holder: str, policy: str | None = None) -> dict[str, Any]:
    """Cordon, taint and record the holder and the policy it takes the node under (None: none, and any earlier record
    goes); remember schedulability and an earlier drain taint only when nobody held the node.

    Taking over from a holder that is gone keeps its record: the cordon and the taint on the node are that holder's."""
    annotations: dict[str, str | None] = {HOLDER: holder}
    if policy or POLICY in (node.get("metadata", {}).get("annotations") or {}):
        annotations[POLICY] = policy
    if holder_of(node) is None or WAS_UNSCHEDULABLE not in (node.get("metadata", {}).get("annotations") or {}):
        annotations[WAS_UNSCHEDULABLE] = "true" if node.get("spec", {}).get("unschedulable") else "false"
    if holder_of(node) is None and has_taint(node):
        annotations[WAS_TAINTED] = "true"
    taints = _taints(node) if has_taint(node) else [*_taints(node), dict(TAINT)]
    return {
        "metadata": {"annotations": annotations, "resourceVersion": node["metadata"]["resourceVersion"]},
        "spec": {"unschedulable": True, "taints": taints},
    }


def taken_patch(node: dict[str, Any], holder: str, *, fresh: bool, coordinated: bool, policy: str | None = None) -> dict[str, Any] | None:
    """What holding the node takes: cordon, taint, record the holder and ``policy``, the one governing it now, and
    (Leases coordinated) exclude the node from remediation; when taken now (``fresh``), or when someone undid a part,
    which keeps the policy recorded at takeover. None: all in place."""
    if not (fresh or not node.get("spec", {}).get("unschedulable") or not has_taint(node)
            or (coordinated and not remediation.is_excluded(node))):
        return None
    patch = begin_patch(node, holder, policy if fresh else policy_of(node))
    return remediation.exclude(node, patch) if coordinated else patch


def end_patch(node: dict[str, Any]) -> dict[str, Any]:
    """Remove our records, and our taint unless it was there before; uncordon unless the node was unschedulable before."""
    annotations = node.get("metadata", {}).get("annotations") or {}
    was_unschedulable = annotations.get(WAS_UNSCHEDULABLE) == "true"
    # A fence's mark another deletion left (its operator killed between setting and clearing it) goes too.
    records = [HOLDER, *([POLICY] if POLICY in annotations else []), WAS_UNSCHEDULABLE, WAS_TAINTED, *([FENCE] if FENCE in annotations else [])]
    taints = _taints(node) if annotations.get(WAS_TAINTED) == "true" else \
        [t for t in _taints(node) if not (t.get("key") == TAINT["key"] and t.get("effect") == TAINT["effect"])]
    return {
        "metadata": {"annotations": dict.fromkeys(records),
                     "resourceVersion": node["metadata"]["resourceVersion"]},
        "spec": {"unschedulable": True if was_unschedulable else None, "taints": taints or None},
    }


def fence_patch(node: dict[str, Any], name: str) -> dict[str, Any]:
    """A write of nothing but the fence mark: set to ``name`` (the NodeMaintenance deleted) when absent, cleared when
    present. Either moves the node's resourceVersion on, and kube-apiserver skips a write that changes nothing, so it
    takes a mark. A take of that maintenance's whose answer never came (a timeout, a restart) may still be queued in the
    API server: it carries an earlier resourceVersion and is refused when it arrives, where it would hold the node for
    a NodeMaintenance gone. Setting it then clearing it leaves the node as it was."""
    return {"metadata": {"annotations": {FENCE: None if fenced(node) else name}, "resourceVersion": node["metadata"]["resourceVersion"]}}


def fenced(node: dict[str, Any]) -> bool:
    """The fence mark is on the node: clearing it is the fence's last write."""
    return FENCE in (node.get("metadata", {}).get("annotations") or {})


def will_uncordon(node: dict[str, Any]) -> bool:
    return (node.get("metadata", {}).get("annotations") or {}).get(WAS_UNSCHEDULABLE) != "true"
