"""A NodeMaintenancePolicy, a node and a NodeMaintenance as the policy decisions read them, as pure functions.

The decisions read little of each object, and keep only that much of it (``slim_node``, ``slim_maintenance``): a
node's heartbeat or a drain's progress changes nothing they read, so it wakes no decision.

The Queued condition's type and reasons are defined here, below the NodeMaintenance's wording
(:mod:`node_maintenance.policy.wording`), because the decisions read one of them back: a maintenance whose Queued
reason is SlotGivenBack gave its slot back.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from node_maintenance.drain import pods, status
from node_maintenance.drain.nodes import HOLDER, POLICY, holder_of, policy_of
from node_maintenance.drain.plans import Action, Escalation
from node_maintenance.drain.rules import Rule
from node_maintenance.policy import health, hooks, windows
from node_maintenance.policy.windows import Window, WindowState  # by name: a policy's field is called windows

QUEUED = "Queued"  # the NodeMaintenance's condition: whether it waits in a policy's line


class QueuedReason(StrEnum):
    """The reasons of the Queued condition."""

    WAITING_FOR_SLOT = "WaitingForSlot"
    WAITING_FOR_WINDOW = "WaitingForWindow"  # while no window is open
    POLICY_CONFLICT = "PolicyConflict"
    WAITING_FOR_POLICIES = "WaitingForPolicies"
    SLOT_GIVEN_BACK = "SlotGivenBack"  # marks a slot given back
    SLOT_GRANTED = "SlotGranted"
    NO_POLICY = "NoPolicy"


class WindowEnd(StrEnum):
    """spec.windowEnd: what maintenances holding a node do when no window is open any more."""

    CONTINUE = "Continue"
    PAUSE = "Pause"


class MaxEscalation(StrEnum):
    """spec.drain.maxEscalation: the furthest the escalation ladders of the maintenances a policy governs may go."""

    NONE = "None"  # eviction only: every step is dropped
    DELETE_PODS = "DeletePods"  # a ForceDeletePods step is dropped
    FORCE_DELETE_PODS = "ForceDeletePods"  # the whole ladder is followed


# The escalation actions each cap leaves in a ladder.
_ALLOWED = {MaxEscalation.NONE: frozenset[Action](), MaxEscalation.DELETE_PODS: frozenset({Action.DELETE_PODS}),
            MaxEscalation.FORCE_DELETE_PODS: frozenset(Action)}


@dataclass(frozen=True)
class TopologyLimit:
    """One entry of spec.topologyLimits."""

    key: str
    max_parallel: int | str | None = None
    max_unavailable: int | str | None = None


@dataclass(frozen=True)
class Policy:
    """A NodeMaintenancePolicy as the decisions read it."""

    name: str
    generation: int = 1
    node_selector: Mapping[str, Any] = field(default_factory=dict)
    max_parallel: int | str | None = None
    max_unavailable: int | str | None = None
    pre_drain: Mapping[str, Any] | None = None  # the Job template
    post_maintenance: Mapping[str, Any] | None = None
    hook_namespaces: Mapping[str, str] = field(default_factory=dict)  # where each hook's Job runs ("": none named)
    drain: Mapping[str, Any] = field(default_factory=dict)  # the drain defaults, maxEscalation left out
    max_escalation: MaxEscalation | None = None  # None: no cap
    rules: tuple[Rule, ...] = ()
    windows: tuple[Window, ...] = ()
    invalid_windows: tuple[str, ...] = ()  # why each window that cannot be read is refused: then none is ever open
    window_end: str = WindowEnd.CONTINUE  # as stored: a WindowEnd value
    topology: tuple[TopologyLimit, ...] = ()
    wait_for_healthy: bool = False
    wait_for_healthy_seconds: int = health.DEFAULT_WAIT_SECONDS

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> Policy:
        spec = body.get("spec") or {}
        templates = hooks.templates(spec)
        drain = dict(spec.get("drain") or {})
        cap = drain.pop("maxEscalation", None)
        parsed, invalid = windows.parse(spec.get("windows") or ())
        return cls(
            name=body["metadata"]["name"],
            generation=body["metadata"].get("generation", 1),
            node_selector=spec.get("nodeSelector") or {},
            max_parallel=spec.get("maxParallel"),
            max_unavailable=spec.get("maxUnavailable"),
            pre_drain=templates.get(hooks.PRE_DRAIN),
            post_maintenance=templates.get(hooks.POST_MAINTENANCE),
            hook_namespaces=hooks.namespaces(spec),
            drain=drain,
            max_escalation=MaxEscalation(cap) if cap is not None else None,
            rules=tuple(Rule.of(rule) for rule in spec.get("drainRules") or ()),
            windows=parsed,
            invalid_windows=invalid,
            window_end=spec.get("windowEnd") or WindowEnd.CONTINUE,
            topology=tuple(TopologyLimit(key=t["topologyKey"], max_parallel=t.get("maxParallel"), max_unavailable=t.get("maxUnavailable"))
                           for t in spec.get("topologyLimits") or ()),
            wait_for_healthy=bool(spec.get("waitForHealthy")),
            wait_for_healthy_seconds=spec.get("waitForHealthySeconds") or health.DEFAULT_WAIT_SECONDS,
        )

    def capped(self, ladder: tuple[Escalation, ...]) -> tuple[Escalation, ...]:
        """The steps of ``ladder`` (a governed maintenance's own, or inherited from the drain defaults) that its
        maxEscalation lets through: a cap only ever drops steps, so it narrows what the operator does."""
        if self.max_escalation is None:
            return ladder
        return tuple(step for step in ladder if step.action in _ALLOWED[self.max_escalation])

    @property
    def windowed(self) -> bool:
        """Whether windows pace it (windows that cannot be read do: they are never open)."""
        return bool(self.windows or self.invalid_windows)

    def window(self, now: datetime.datetime) -> WindowState | None:
        """Where its windows stand at ``now``; None without windows (always open)."""
        if not self.windowed:
            return None
        return windows.state_at(self.windows, now) if not self.invalid_windows else WindowState(open=False)

    def selects(self, node: Mapping[str, Any]) -> bool:
        return pods.matches_selector(node.get("metadata", {}).get("labels") or {}, dict(self.node_selector))

    @property
    def hook_templates(self) -> dict[str, Mapping[str, Any]]:
        """The Job template of each hook the policy declares."""
        declared = {hooks.PRE_DRAIN: self.pre_drain, hooks.POST_MAINTENANCE: self.post_maintenance}
        return {hook: template for hook, template in declared.items() if template is not None}

    def hook_namespace(self, hook: str) -> str:
        """Where ``hook``'s Job runs ("" when the policy names no namespace for it)."""
        return self.hook_namespaces.get(hook, "")


def resolve(value: int | str | None, total: int) -> int | None:
    """A count, or a percentage of ``total`` nodes rounded down but at least 1 unless it is 0%; None: no limit.

    Rounding down keeps the limit on the safe side; the floor of 1 keeps a small pool from deadlocking
    (10% of 5 nodes would otherwise never let one go).
    """
    if value is None:
        return None
    if isinstance(value, int):
        return value
    percent = int(value.rstrip("%"))
    return max(1, math.floor(total * percent / 100)) if percent > 0 else 0


def slim_node(node: dict[str, Any]) -> dict[str, Any]:
    """What the decisions read of a node: its labels, its holder and the policy it took the node under, whether it is
    schedulable and Ready. A heartbeat changes none of it, so it wakes no drain."""
    meta = node["metadata"]
    holder, policy = holder_of(node), policy_of(node)
    ready = [{"type": "Ready", "status": c.get("status")} for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
    held = {HOLDER: holder, **({POLICY: policy} if policy else {})} if holder else {}
    return {"metadata": {"name": meta["name"], "labels": meta.get("labels") or {}, "annotations": held},
            "spec": {"unschedulable": bool((node.get("spec") or {}).get("unschedulable"))}, "status": {"conditions": ready}}


def slim_maintenance(maintenance: dict[str, Any]) -> dict[str, Any]:
    """What the decisions read of a NodeMaintenance: its node, its place in line, whether it gave its slot
    back and whether its timeout ended it, not the rest of its status, which the drains write every few seconds."""
    meta = maintenance["metadata"]
    slim = {"metadata": {k: meta[k] for k in ("name", "creationTimestamp", "deletionTimestamp") if k in meta},
            "spec": {"nodeName": (maintenance.get("spec") or {}).get("nodeName")}}
    stored = maintenance.get("status") or {}
    kept = [*([{"type": QUEUED, "reason": QueuedReason.SLOT_GIVEN_BACK}] if gave_back(maintenance) else []),
            *([{"type": status.TIMED_OUT, "status": "True"}] if status.timed_out(stored) else [])]
    return {**slim, "status": {"conditions": kept}} if kept else slim


def gave_back(maintenance: Mapping[str, Any]) -> bool:
    """Whether its status says a check at takeover refused the node and its slot went back."""
    return any(c.get("type") == QUEUED and c.get("reason") == QueuedReason.SLOT_GIVEN_BACK
               for c in (maintenance.get("status") or {}).get("conditions") or [])


def unavailable(node: Mapping[str, Any]) -> bool:
    """Unschedulable or not Ready: out of service whatever the reason."""
    if (node.get("spec") or {}).get("unschedulable"):
        return True
    ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    return not ready or ready.get("status") != "True"


def governing(policies: Iterable[Policy], node: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of the policies that govern ``node``, in name order (more than one: a conflict): those that select it,
    and, while a maintenance holds it, the one it was taken under, which keeps counting it and ruling its drain
    whatever its labels or the policy's selector say now, until it is given back."""
    recorded = policy_of(dict(node))
    return tuple(sorted({p.name for p in policies if p.selects(node) or p.name == recorded}))


def with_defaults(body: Mapping[str, Any], policy: Policy) -> dict[str, Any]:
    """The NodeMaintenance with the policy's drain defaults filled in where its own spec.drain is silent."""
    spec = dict(body.get("spec") or {})
    spec["drain"] = {**policy.drain, **(spec.get("drain") or {})}
    return {**body, "spec": spec}
