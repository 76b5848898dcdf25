"""What a run of the operator leaves behind, as frozen records: the cluster before and after each step, and what the
operator asked of the API in between.

The invariants judge a step by what its actions did (a take is a node patch that names a new holder, a removal an
eviction or a deletion), so that a change made by someone else (a node going NotReady, an admin's edit, a fault) is not
blamed on the operator, while the states tell what every action met and left.

Objects are kept as the Kubernetes API returns them, keyed as an admin names them: nodes, NodeMaintenances and
NodeMaintenancePolicies by name, the namespaced kinds by "namespace/name".
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from node_maintenance.api.objects import key_of
from node_maintenance.drain.nodes import HOLDER, holder_of

Obj = Mapping[str, Any]
Objects = Mapping[str, Obj]
# The kinds a state holds by the field that holds them; the cluster-scoped ones are keyed by name alone.
STEP_SECONDS = 1.0  # a step of a simulated history: the instants the promises are checked at
KINDS = ("nodes", "pods", "budgets", "maintenances", "policies", "departed", "daemonsets", "replicasets", "statefulsets")
CLUSTER_SCOPED = ("nodes", "maintenances", "policies", "departed")


class ActionKind(enum.StrEnum):
    """What the operator asked of the API, and the API applied."""

    NODE_PATCH = "NodePatch"  # cordon, taint, record or remove the holder: a take or a hand-back
    EVICTION = "Eviction"  # paced by the pod's budgets
    POD_DELETE = "PodDelete"  # bypasses the budgets: a finished pod, or an escalation step
    STATUS_WRITE = "StatusWrite"  # a NodeMaintenance's status
    MAINTENANCE_PATCH = "MaintenancePatch"  # a NodeMaintenance's metadata: its finalizer
    POLICY_STATUS_WRITE = "PolicyStatusWrite"  # a NodeMaintenancePolicy's status: its line, its recovering nodes
    JOB_CREATE = "JobCreate"  # a policy's hook Job
    LEASE_WRITE = "LeaseWrite"  # a remediation Lease, or the leader's
    EVENT_CREATE = "EventCreate"


@dataclass(frozen=True)
class State:
    """The cluster as the API holds it at ``at``, the simulated clock."""

    at: datetime.datetime
    revision: int = 0  # the API's resourceVersion when taken (a removal's is on the object it removed)
    nodes: Objects = field(default_factory=dict)
    pods: Objects = field(default_factory=dict)
    budgets: Objects = field(default_factory=dict)  # PodDisruptionBudgets
    maintenances: Objects = field(default_factory=dict)  # NodeMaintenances
    policies: Objects = field(default_factory=dict)  # NodeMaintenancePolicies
    # Each NodeMaintenancePolicy deleted, as the API held it last: an edit made just before the deletion, between two
    # states, reached the operator's watch too.
    departed: Objects = field(default_factory=dict)
    # Read only where a promise needs them: whether a DaemonSet pod's DaemonSet exists (a drain evicts the pods of one
    # that is gone), and the workloads a recovering node waits for.
    daemonsets: Objects = field(default_factory=dict)
    replicasets: Objects = field(default_factory=dict)
    statefulsets: Objects = field(default_factory=dict)
    # Each pod removed so far, by the resourceVersion of its removal: orders the removals within a step (the kubelet's
    # finishing a deletion against the drain's next eviction), which the states at its two ends cannot.
    pod_removals: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, at: datetime.datetime, revision: int = 0, **objects: Iterable[Obj]) -> State:
        """A state from lists of objects by kind (``nodes=[...]``, ``pods=[...]``), each keyed as the API names it."""
        return cls(at=at, revision=revision).put(None, **objects)

    def put(self, at: datetime.datetime | None = None, **objects: Iterable[Obj]) -> State:
        """This state at ``at`` (unchanged if None) with ``objects`` added or replacing those of the same key."""
        changed: dict[str, Any] = {kind: {**getattr(self, kind), **{_key(kind, obj): obj for obj in listed}} for kind, listed in objects.items()}
        return replace(self, **changed, at=at or self.at)

    def drop(self, kind: str, *keys: str) -> State:
        """This state without the objects of ``kind`` keyed ``keys``."""
        kept: dict[str, Any] = {kind: {key: obj for key, obj in getattr(self, kind).items() if key not in keys}}
        return replace(self, **kept)

    def holder(self, node_name: str) -> str | None:
        """The NodeMaintenance holding the node: its record names one that exists (a record left by one deleted
        by hand holds nothing)."""
        holder = holder_of(dict(self.nodes.get(node_name) or {}))
        return holder if holder in self.maintenances else None


def _key(kind: str, obj: Obj) -> str:
    if kind not in KINDS:
        raise TypeError(f"a state holds no {kind}")
    return str(obj["metadata"]["name"]) if kind in CLUSTER_SCOPED else key_of(obj)


@dataclass(frozen=True)
class Action:
    """One request of the operator the API applied: ``key`` names the object as the state keys it (a node's name, a
    pod's "namespace/name"); ``body`` is what was sent (a patch, a status), ``grace`` a removal's grace period;
    ``maintenance`` the NodeMaintenance it was done for, when known; ``revision`` the API's resourceVersion once it was
    applied (0: not known, as in a hand-written history); ``sent`` the resourceVersion when a write carried out late was
    sent (0: carried out as it came), which dates what the operator decided it from."""

    kind: ActionKind
    key: str
    body: Obj = field(default_factory=dict)
    grace: int | None = None
    maintenance: str | None = None
    revision: int = 0
    sent: int = 0

    @property
    def holder_written(self) -> tuple[bool, str | None]:
        """Whether a node patch writes the holder record, and what (None: removes it)."""
        annotations = (self.body.get("metadata") or {}).get("annotations") or {}
        if self.kind is not ActionKind.NODE_PATCH or HOLDER not in annotations:
            return False, None
        return True, annotations[HOLDER]


@dataclass(frozen=True)
class Take:
    """A node taken in a step: its holder record newly names ``maintenance``."""

    node: str
    maintenance: str
    revision: int = 0  # the API's resourceVersion once its node patch was applied (0: not known)


@dataclass(frozen=True)
class Step:
    """The cluster before, what the operator did, the cluster after."""

    before: State
    actions: tuple[Action, ...]
    after: State
    started: bool = False  # the operator (re)started just before this step: it knew nothing of the states before
    # The resourceVersion the running operator's first listing of the policies it had the answer to was served at, by
    # this step's end; None when the history does not know it (built by hand; or not listed yet): taken as listed as
    # its first step began.
    listed: int | None = None
    # The revision the running operator's listing or watch of the policies had brought it up to by this step's end
    # (SimulatedApi.told); None when the history does not know it (built by hand, or not listed yet: a drain waits for
    # the first listing): taken as up to date.
    told: int | None = None

    def takes(self) -> list[Take]:
        """The nodes whose holder record a node patch of this step set to another NodeMaintenance than the one before."""
        found = []
        for action in self.actions:
            written, holder = action.holder_written
            if written and holder is not None and holder != holder_of(dict(self.before.nodes.get(action.key) or {})):
                found.append(Take(node=action.key, maintenance=holder, revision=action.revision))
        return found

    def seconds(self) -> float:
        """How long the step ran on the simulated monotonic clock: the wall clock jumps only between steps."""
        return (self.after.at - self.before.at).total_seconds()

    def gives_back(self) -> list[str]:
        """The nodes whose holder record a node patch of this step removed, of one that held them."""
        return [action.key for action in self.of_kind(ActionKind.NODE_PATCH)
                if action.holder_written == (True, None) and holder_of(dict(self.before.nodes.get(action.key) or {})) is not None]

    def patched(self) -> set[str]:
        """The nodes a node patch of this step touched."""
        return {a.key for a in self.actions if a.kind is ActionKind.NODE_PATCH}

    def of_kind(self, *kinds: ActionKind) -> list[Action]:
        return [a for a in self.actions if a.kind in kinds]


History = Sequence[Step]


def step(before: State, after: State, *actions: Action, started: bool = False) -> Step:
    """A step from ``before`` to ``after`` by ``actions`` (``started``: the operator started just before it), for tests
    and the simulation alike."""
    return Step(before=before, actions=tuple(actions), after=after, started=started)


def last_free(history: History, node_name: str) -> Obj | None:
    """The node as it was the last time nobody held it, up to the newest step's start: what giving it back restores."""
    earlier = (state for st in reversed(history[:-1]) for state in (st.after, st.before))
    for state in (history[-1].before, *earlier):
        node = state.nodes.get(node_name)
        if node is not None and holder_of(dict(node)) is None:
            return node
    return None


def known(history: History) -> State:
    """What the operator surely knew when the newest step began: the end of the step before (a user's change made
    between the two reaches it through a watch, at the same instant the step starts); the step's start for the first."""
    return history[-2].after if len(history) > 1 else history[-1].before
