"""Drain rules of a NodeMaintenancePolicy: which pods a drain evicts in which order, leaves, or waits for.

Pure functions over pod dicts. A rule selects pods by label (and optionally namespace) and gives them
an ``order`` (lower orders leave first; an order starts once every pod of the lower ones has left) or a
behaviour: ``Skip`` (stay; the drain does not wait for them) or ``WaitCompleted`` (never evicted; the
drain waits until they complete). The first matching rule applies; pods no rule selects have order 0.
The pod annotation ``nodemaintenance.kubevirt.io/drain: skip|wait-completed`` overrides every rule.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from node_maintenance.api.objects import key_of
from node_maintenance.drain import pods

ANNOTATION = pods.DRAIN_ANNOTATION


class Behavior(enum.Enum):
    DRAIN = "Drain"
    SKIP = "Skip"
    WAIT_COMPLETED = "WaitCompleted"
    INVALID = "Invalid"  # a misspelt annotation: the pod is protected until it is fixed


ANNOTATION_VALUES = {"skip": Behavior.SKIP, "wait-completed": Behavior.WAIT_COMPLETED}


@dataclass(frozen=True)
class Rule:
    selector: Mapping[str, Any]
    namespaces: tuple[str, ...] = ()
    behavior: Behavior = Behavior.DRAIN
    order: int = 0

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> Rule:
        return cls(
            selector=spec.get("podSelector") or {},
            namespaces=tuple(spec.get("namespaces") or ()),
            behavior=Behavior(spec.get("behavior") or "Drain"),
            order=int(spec.get("order") or 0),
        )

    def matches(self, pod: Mapping[str, Any]) -> bool:
        meta = pod.get("metadata", {})
        if self.namespaces and meta.get("namespace") not in self.namespaces:
            return False
        return pods.matches_selector(meta.get("labels") or {}, dict(self.selector))


@dataclass(frozen=True)
class Treatment:
    behavior: Behavior
    order: int = 0
    why: str = ""  # for the status: why the pod is not evicted (empty when it is)


def treatment(pod: Mapping[str, Any], rules: Iterable[Rule]) -> Treatment:
    """How the drain treats ``pod``: its annotation first, then the first rule selecting it."""
    annotation = (pod.get("metadata", {}).get("annotations") or {}).get(ANNOTATION)
    ref = key_of(dict(pod))
    if annotation is not None:
        behavior = ANNOTATION_VALUES.get(annotation.strip().lower(), Behavior.INVALID)
        if behavior is Behavior.INVALID:
            return Treatment(behavior, why=f"{ref}: annotation {ANNOTATION}={annotation!r} is neither skip nor wait-completed, "
                                           "so the pod is not evicted; fix or remove the annotation")
        return Treatment(behavior, why=_why(ref, behavior))
    for rule in rules:
        if rule.matches(pod):
            return Treatment(rule.behavior, rule.order, _why(ref, rule.behavior))
    return Treatment(Behavior.DRAIN)


def _why(ref: str, behavior: Behavior) -> str:
    return f"{ref} is left to complete by itself (WaitCompleted)" if behavior is Behavior.WAIT_COMPLETED else ""


def held(treated: Iterable[tuple[Mapping[str, Any], Treatment]]) -> dict[str, str]:
    """Pods (by uid) the drain must not remove now, with why, from the pods still to go with their treatment:
    WaitCompleted or misannotated pods until they finish, and pods of an order above the lowest one still on the
    node (a finished pod may always go)."""
    unfinished = [(pod["metadata"]["uid"], t) for pod, t in treated if not pods.finished(pod)]
    current = min((t.order for _, t in unfinished if t.behavior is Behavior.DRAIN), default=0)
    out: dict[str, str] = {}
    for uid, t in unfinished:
        if t.behavior in (Behavior.WAIT_COMPLETED, Behavior.INVALID):
            out[uid] = t.why
        elif t.behavior is Behavior.DRAIN and t.order > current:
            out[uid] = ""  # its order starts once order {current} has left
    return out
