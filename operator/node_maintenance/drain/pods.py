"""Which pods a drain touches, decided like `kubectl drain --ignore-daemonsets --delete-emptydir-data --force`.

Pure functions over pod dicts (as the API returns them), so every rule is tested without a cluster. The one
thing read besides the pods is what kubectl drain reads too: whether the DaemonSet an unfinished DaemonSet
pod names still exists (``daemonsets``, by "namespace/name"; one absent from it is unknown).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any, cast

from node_maintenance.api import GROUP

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# A pod's own drain rule (skip, wait-completed), read by ``rules``.
DRAIN_ANNOTATION = f"{GROUP}/drain"
# The only annotations a decision reads: a pod's others (often large, e.g. last-applied-configuration) are not kept.
READ_ANNOTATIONS = (MIRROR_ANNOTATION, DRAIN_ANNOTATION)
DAEMONSET_API_VERSION = "apps/v1"  # kubectl drain tells a DaemonSet pod by its controller's kind and apiVersion both
FINISHED_PHASES = ("Succeeded", "Failed")


class Action(enum.Enum):
    KEEP_DAEMONSET = "daemonset"  # --ignore-daemonsets: its DaemonSet would recreate it on the node anyway
    KEEP_UNKNOWN_DAEMONSET = "daemonset-unknown"  # whether its DaemonSet exists could not be read: in doubt it stays
    KEEP_MIRROR = "mirror"  # static pods belong to the kubelet; the API cannot remove them
    KEEP_UNSELECTED = "unselected"  # outside spec.drain.podSelector: not ours to touch, count or wait on
    DELETE_FINISHED = "finished"  # Succeeded/Failed: nothing to protect, an eviction would be pointless
    EVICT = "evict"  # everything else, including emptyDir users (--delete-emptydir-data) and bare pods (--force)


def controller_of(pod: dict[str, Any]) -> dict[str, Any] | None:
    for ref in pod.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return cast(dict[str, Any], ref)
    return None


def daemonset_of(pod: dict[str, Any]) -> str | None:
    """The DaemonSet controlling ``pod`` ("namespace/name"), told as kubectl drain tells it: kind and apiVersion."""
    controller = controller_of(pod)
    if controller and controller.get("kind") == "DaemonSet" and controller.get("apiVersion") == DAEMONSET_API_VERSION:
        return f"{pod['metadata'].get('namespace', '')}/{controller.get('name', '')}"
    return None


def finished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in FINISHED_PHASES


def daemonsets_to_read(node_pods: Iterable[dict[str, Any]]) -> set[str]:
    """The DaemonSets whose existence decides a pod's fate: those of unfinished pods (a finished one goes anyway)."""
    return {key for pod in node_pods if not finished(pod) and (key := daemonset_of(pod)) is not None}


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


def classify(pod: dict[str, Any], selector: dict[str, Any] | None = None, daemonsets: Mapping[str, bool] | None = None) -> Action:
    """What the drain does with ``pod``; ``daemonsets`` says whether each DaemonSet ("namespace/name") exists.

    As kubectl drain's daemonSetFilter: a finished DaemonSet pod goes, one whose DaemonSet is gone is evicted
    (--force), the others stay. Where kubectl refuses the whole node (the DaemonSet could not be read), only
    that pod stays: in doubt, nothing is evicted."""
    metadata = pod.get("metadata", {})
    if MIRROR_ANNOTATION in (metadata.get("annotations") or {}):
        return Action.KEEP_MIRROR
    if not matches_selector(metadata.get("labels") or {}, selector):
        return Action.KEEP_UNSELECTED
    if finished(pod):
        return Action.DELETE_FINISHED
    daemonset = daemonset_of(pod)
    if daemonset is not None:
        exists = (daemonsets or {}).get(daemonset)
        if exists is None:
            return Action.KEEP_UNKNOWN_DAEMONSET
        if exists:
            return Action.KEEP_DAEMONSET
    return Action.EVICT


def escalable(pod: dict[str, Any]) -> bool:
    """Whether an escalation may delete ``pod``: never a mirror pod (the kubelet's) nor a DaemonSet's, whatever else holds."""
    return MIRROR_ANNOTATION not in (pod.get("metadata", {}).get("annotations") or {}) and daemonset_of(pod) is None


def must_go(pod: dict[str, Any], selector: dict[str, Any] | None = None, daemonsets: Mapping[str, bool] | None = None) -> bool:
    """Whether the drain waits for this pod to leave the node."""
    return classify(pod, selector, daemonsets) in (Action.EVICT, Action.DELETE_FINISHED)


def slim(pod: dict[str, Any]) -> dict[str, Any]:
    """What the drain's decisions read of a pod: its metadata (of its annotations, the ones read), node, phase
    and conditions.

    A draining node's pods are held in memory until it is drained; their spec and container
    statuses are most of their size, and no decision reads them (a new one that does keeps them here).
    """
    metadata = {k: v for k, v in (pod.get("metadata") or {}).items() if k not in ("managedFields", "annotations")}
    annotations = {k: v for k, v in ((pod.get("metadata") or {}).get("annotations") or {}).items() if k in READ_ANNOTATIONS}
    if annotations:
        metadata["annotations"] = annotations
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    return {"metadata": metadata, "spec": {k: spec[k] for k in ("nodeName",) if k in spec},
            "status": {k: status[k] for k in ("phase", "conditions") if k in status}}

