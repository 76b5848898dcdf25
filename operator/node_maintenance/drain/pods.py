"""Which pods a drain touches, decided like `kubectl drain --ignore-daemonsets --delete-emptydir-data --force`.

Pure functions over pod dicts (as the API returns them), so every rule is tested without a cluster.
"""

from __future__ import annotations

import enum
from typing import Any, cast

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


class Action(enum.Enum):
    KEEP_DAEMONSET = "daemonset"  # --ignore-daemonsets: its controller would recreate it on the node anyway
    KEEP_MIRROR = "mirror"  # static pods belong to the kubelet; the API cannot remove them
    KEEP_UNSELECTED = "unselected"  # outside spec.drain.podSelector: not ours to touch, count or wait on
    DELETE_FINISHED = "finished"  # Succeeded/Failed: nothing to protect, an eviction would be pointless
    EVICT = "evict"  # everything else, including emptyDir users (--delete-emptydir-data) and bare pods (--force)


def controller_of(pod: dict[str, Any]) -> dict[str, Any] | None:
    for ref in pod.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return cast(dict[str, Any], ref)
    return None


def matches_selector(labels: dict[str, str], selector: dict[str, Any] | None) -> bool:
    """metav1.LabelSelector semantics; an absent selector matches everything."""
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def classify(pod: dict[str, Any], selector: dict[str, Any] | None = None) -> Action:
    metadata = pod.get("metadata", {})
    if MIRROR_ANNOTATION in (metadata.get("annotations") or {}):
        return Action.KEEP_MIRROR
    if not matches_selector(metadata.get("labels") or {}, selector):
        return Action.KEEP_UNSELECTED
    controller = controller_of(pod)
    if controller and controller.get("kind") == "DaemonSet":
        return Action.KEEP_DAEMONSET
    if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
        return Action.DELETE_FINISHED
    return Action.EVICT


def must_go(pod: dict[str, Any], selector: dict[str, Any] | None = None) -> bool:
    """Whether the drain waits for this pod to leave the node."""
    return classify(pod, selector) in (Action.EVICT, Action.DELETE_FINISHED)


def slim(pod: dict[str, Any]) -> dict[str, Any]:
    """What the drain's decisions read of a pod: its metadata, node, phase and conditions.

    A draining node's pods are held in memory until it is drained; their spec and container
    statuses are most of their size, and no decision reads them (a new one that does keeps them here).
    """
    metadata = {k: v for k, v in (pod.get("metadata") or {}).items() if k != "managedFields"}
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    return {"metadata": metadata, "spec": {k: spec[k] for k in ("nodeName",) if k in spec},
            "status": {k: status[k] for k in ("phase", "conditions") if k in status}}

