"""What unit tests are made of, built in one place.

- ``pod``, ``node``, ``budget`` (a PodDisruptionBudget), ``daemonset``, ``nm`` (a NodeMaintenance) and
  ``nm_policy`` (a NodeMaintenancePolicy), as the API server would show them, plus ``etcd_guard``, ``lease``
  ``policy_hook`` (a policy's preDrain or postMaintenance) and ``hook_template`` (a policy hook's jobTemplate);
- the scenes several test packages share: the drain planner's (``NOW``, ``scene_pod``, ``HELD``,
  ``RUNNING``, ``maintenance``, ``terms``, ``scene_removal``…, and its table rows: a ``scene`` of one step,
  ``again`` for the step after, ``row`` to name them, ``shows`` for what a row expects of each plan,
  ``outcomes`` for what each shows, ``Text`` for a message that holds given words), the runtime's (``runtime_node``, ``runtime_pod``, ``runtime_nm``) and the watch
  tests' (``script_watch_scene``);
- a simulated history's actions (``take_patch``, ``give_back_patch``, ``removal``);
- ``FakeApi``, the one stand-in for the operator's API access.

Each builder writes a field only when asked to (or when a default below says so), so that a test's
object holds exactly what the test meant it to hold. A module that always wants the same extras binds
them once with ``functools.partial``. Dictionaries passed in are copied, never kept.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import datetime
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from functools import partial
from typing import Any, NamedTuple

import pytest

from node_maintenance.api import GROUP, KIND
from node_maintenance.client.credentials import Credentials
from node_maintenance.client.errors import Gone, NotFound, Unreachable
from node_maintenance.client.watch import Mirror
from node_maintenance.coordination import remediation
from node_maintenance.drain import planner
from node_maintenance.drain.memory import WatchMode
from node_maintenance.drain.nodes import HOLDER, POLICY, TAINT, WAS_TAINTED, WAS_UNSCHEDULABLE, begin_patch, end_patch
from node_maintenance.drain.plans import Maintenance, Plan, PolicyTerms, Removal
from node_maintenance.drain.status import timed_out
from node_maintenance.policy.terms import Seen
from node_maintenance.policy.verdicts import Verdict
from node_maintenance.runtime.engine import Engine
from simulation.history import Action, ActionKind
from simulation.selectors import labels_match

Obj = dict[str, Any]


# ---------------------------------------------------------------- pods and their controllers
# The apiVersion an ownerReference of each controller kind carries (kubectl drain reads it to tell a DaemonSet's pod).
OWNER_API_VERSIONS = {"DaemonSet": "apps/v1", "ReplicaSet": "apps/v1", "StatefulSet": "apps/v1", "Job": "batch/v1"}


def pod(name: str = "p", *, namespace: str = "ns", uid: str | None = None, labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, owner: str | None = "ReplicaSet", owner_name: str = "o",
        owners: list[Obj] | None = None, node: str | None = None, volumes: list[Obj] | None = None,
        phase: str = "Running", ready: bool | None = True, deleted_at: str | None = None, **metadata: Any) -> Obj:
    """A pod. ``uid`` may say ``{name}`` for the pod's name; ``labels`` None leaves them out; ``owner`` is
    the kind of its controller (named ``owner_name``), unless ``owners`` gives the ownerReferences whole;
    ``ready`` None leaves the Ready condition out; ``deleted_at`` makes it terminating; other keywords go
    into its metadata. An owner of a kind in ``OWNER_API_VERSIONS`` gets that apiVersion."""
    meta: Obj = {"name": name, "namespace": namespace}
    if uid is not None:
        meta["uid"] = uid.format(name=name)
    if labels is not None:
        meta["labels"] = dict(labels)
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    meta.update(metadata)
    if owners is not None:
        meta["ownerReferences"] = copy.deepcopy(owners)
    elif owner:
        api_version = {"apiVersion": OWNER_API_VERSIONS[owner]} if owner in OWNER_API_VERSIONS else {}
        meta["ownerReferences"] = [{**api_version, "kind": owner, "name": owner_name, "controller": True}]
    if deleted_at is not None:
        meta["deletionTimestamp"] = deleted_at
    obj: Obj = {"metadata": meta}
    spec: Obj = {}
    if node is not None:
        spec["nodeName"] = node
    if volumes is not None:
        spec["volumes"] = copy.deepcopy(volumes)
    if spec:
        obj["spec"] = spec
    status: Obj = {"phase": phase}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    obj["status"] = status
    return obj


def daemonset(name: str = "agent", *, namespace: str = "ns") -> Obj:
    """A DaemonSet, as much of it as the drain reads: that it exists."""
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": namespace}}


# ---------------------------------------------------------------- nodes
def node(name: str = "n1", *, uid: str | None = None, resource_version: str | None = None, labels: dict[str, str] | None = None,
         annotations: dict[str, str] | None = None, holder: str | None = None, policy: str | None = None, was_unschedulable: bool | None = None,
         was_tainted: bool = False, spec: Obj | None = None, unschedulable: bool | None = None, taints: Iterable[Obj] | None = None,
         status: Obj | None = None, ready: bool | None = None, conditions: list[Obj] | None = None) -> Obj:
    """A node. ``uid`` may say ``{name}``; ``holder``, ``policy``, ``was_unschedulable`` and ``was_tainted`` write the
    annotations of a node a NodeMaintenance holds (the policy it took it under; a drain taint is recorded only when it
    was there before); ``spec`` is there (even
    empty) when given or when ``unschedulable`` or ``taints`` are; ``ready`` writes a lone Ready condition,
    ``conditions`` any list of them."""
    meta: Obj = {"name": name}
    if uid is not None:
        meta["uid"] = uid.format(name=name)
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    if labels is not None:
        meta["labels"] = dict(labels)
    if annotations is not None or holder is not None or policy is not None or was_unschedulable is not None or was_tainted:
        meta["annotations"] = dict(annotations or {})
        if holder is not None:
            meta["annotations"][HOLDER] = holder
        if policy is not None:
            meta["annotations"][POLICY] = policy
        if was_unschedulable is not None:
            meta["annotations"][WAS_UNSCHEDULABLE] = "true" if was_unschedulable else "false"
        if was_tainted:
            meta["annotations"][WAS_TAINTED] = "true"
    obj: Obj = {"metadata": meta}
    if spec is not None or unschedulable is not None or taints is not None:
        obj["spec"] = dict(spec or {})
        if unschedulable is not None:
            obj["spec"]["unschedulable"] = unschedulable
        if taints is not None:
            obj["spec"]["taints"] = [dict(taint) for taint in taints]
    if status is not None or ready is not None or conditions is not None:
        obj["status"] = dict(status or {})
        if ready is not None:
            obj["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
        if conditions is not None:
            obj["status"]["conditions"] = copy.deepcopy(conditions)
    return obj


CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"  # Kubernetes' label
control_plane_node = partial(node, labels={CONTROL_PLANE_LABEL: ""}, ready=True)  # as the quorum rules read it: labels and Ready


# ---------------------------------------------------------------- PodDisruptionBudgets
def budget(name: str = "web", *, namespace: str = "ns", generation: int | None = None, resource_version: str | None = None,
           labels: dict[str, str] | None = None, selector: Obj | None = None, status: Obj | None = None,
           observed: int | None = None, allowed: int | None = None, healthy: int | None = None, desired: int | None = None,
           expected: int | None = None, **spec: Any) -> Obj:
    """A PodDisruptionBudget. Its selector is ``selector``, else matchLabels ``labels`` (neither: none);
    other keywords (minAvailable, maxUnavailable, unhealthyPodEvictionPolicy) go into its spec. Its
    status holds what is given of ``observed`` (observedGeneration), ``allowed`` (disruptionsAllowed),
    ``healthy``, ``desired`` (currentHealthy, desiredHealthy) and ``expected`` (expectedPods), over
    ``status``; with none of them there is no status."""
    meta: Obj = {"name": name, "namespace": namespace}
    if generation is not None:
        meta["generation"] = generation
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    obj: Obj = {"metadata": meta}
    if selector is not None:
        spec = {"selector": copy.deepcopy(selector), **spec}
    elif labels is not None:
        spec = {"selector": {"matchLabels": dict(labels)}, **spec}
    if spec:
        obj["spec"] = spec
    counts = {"observedGeneration": observed, "disruptionsAllowed": allowed, "currentHealthy": healthy,
              "desiredHealthy": desired, "expectedPods": expected}
    given = {key: value for key, value in counts.items() if value is not None}
    if status is not None or given:
        obj["status"] = {**(status or {}), **given}
    return obj


def etcd_guard(allowed: int, name: str = "etcd-guard-pdb", *, healthy: int | None = None, desired: int = 2) -> Obj:
    """OpenShift's etcd quorum guard budget over the guard pods (label app=guard) of three members, keeping ``desired`` of
    them healthy; ``healthy`` guard pods are (unless given: as many as ``allowed`` disruptions leave)."""
    return budget(name, namespace="openshift-etcd", generation=1, labels={"app": "guard"}, observed=1, allowed=allowed,
                  healthy=desired + allowed if healthy is None else healthy, desired=desired)


# ---------------------------------------------------------------- NodeMaintenances and NodeMaintenancePolicies
def nm(name: str = "nm", node: str | None = "n1", *, version: str | None = None, uid: str | None = None,
       generation: int | None = None, resource_version: str | None = None, created: str | None = None, finalizers: list[str] | None = None,
       deleted_at: str | None = None, status: Obj | None = None, **spec: Any) -> Obj:
    """A NodeMaintenance for ``node`` (None: no spec.nodeName, as v1alpha3 allows). ``version`` writes
    apiVersion and kind; ``uid`` may say ``{name}``; other keywords (reason, drain) go into its spec."""
    obj: Obj = {}
    if version is not None:
        obj.update({"apiVersion": f"{GROUP}/{version}", "kind": KIND})
    meta: Obj = {"name": name}
    if uid is not None:
        meta["uid"] = uid.format(name=name)
    if generation is not None:
        meta["generation"] = generation
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    if created is not None:
        meta["creationTimestamp"] = created
    if finalizers is not None:
        meta["finalizers"] = list(finalizers)
    if deleted_at is not None:
        meta["deletionTimestamp"] = deleted_at
    obj["metadata"] = meta
    obj["spec"] = {**({"nodeName": node} if node else {}), **copy.deepcopy(spec)}
    if status is not None:
        obj["status"] = copy.deepcopy(status)
    return obj


def nm_policy(name: str = "p", *, generation: int | None = None, resource_version: str | None = None, node_selector: Obj | None = None,
              **spec: Any) -> Obj:
    """A NodeMaintenancePolicy; keywords (maxParallel, maxUnavailable, drain, drainRules, preDrain…) go into its spec."""
    meta: Obj = {"name": name}
    if generation is not None:
        meta["generation"] = generation
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    selector = {"nodeSelector": copy.deepcopy(node_selector)} if node_selector is not None else {}
    return {"metadata": meta, "spec": {**selector, **copy.deepcopy(spec)}}


def policy_hook(namespace: str | None = "storage-hooks", **pod_spec: Any) -> Obj:
    """A policy hook (preDrain, postMaintenance): its Job runs in ``namespace`` (None: the hook names none, as one
    stored before 0.6.0); keywords go into the pod spec of its :func:`hook_template`."""
    return {"jobTemplate": hook_template(**pod_spec), **({"namespace": namespace} if namespace is not None else {})}


def hook_template(**pod_spec: Any) -> Obj:
    """A policy hook's jobTemplate: a Job of one container; keywords (serviceAccountName, automountServiceAccountToken…)
    go into its pod spec."""
    return {"spec": {"backoffLimit": 0, "template": {"spec": {"containers": [{"name": "hook", "image": "tools:1"}], **copy.deepcopy(pod_spec)}}}}


# ---------------------------------------------------------------- a simulated history's actions
def take_patch(node_obj: Obj, holder: str, policy: str | None = None) -> Action:
    """The node patch by which NodeMaintenance ``holder`` takes ``node_obj`` (under ``policy``), as the drain sends it."""
    body = begin_patch({**node_obj, "metadata": {"resourceVersion": "1", **node_obj["metadata"]}}, holder, policy)
    return Action(kind=ActionKind.NODE_PATCH, key=node_obj["metadata"]["name"], body=body, maintenance=holder)


def give_back_patch(node_obj: Obj, holder: str) -> Action:
    """The node patch by which NodeMaintenance ``holder`` gives ``node_obj`` back, as the drain sends it."""
    body = end_patch({**node_obj, "metadata": {"resourceVersion": "1", **node_obj["metadata"]}})
    return Action(kind=ActionKind.NODE_PATCH, key=node_obj["metadata"]["name"], body=body, maintenance=holder)


def removal(pod_key: str, *, delete: bool = False, grace: int | None = None, maintenance: str | None = None, revision: int = 0,
            sent: int = 0) -> Action:
    """An eviction of the pod ("namespace/name"), or its deletion (``delete``), applied at ``revision`` (carried out
    late: sent at ``sent``)."""
    return Action(kind=ActionKind.POD_DELETE if delete else ActionKind.EVICTION, key=pod_key, grace=grace, maintenance=maintenance,
                  revision=revision, sent=sent)


# ---------------------------------------------------------------- the drain planner's scene
# NodeMaintenance nm drains node n1 of pods in namespace app, at NOW; HELD is the node once nm holds it,
# RUNNING the status of a drain under way for ten seconds; a remediation Lease may hold the node.
NOW = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
CLOCK = NOW.timestamp()
STAMP = "2026-01-01T12:00:00Z"


def ago(seconds: int) -> str:
    """The timestamp ``seconds`` before NOW."""
    return (NOW - datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


scene_pod = partial(pod, namespace="app", uid="uid-{name}", labels={}, owner_name="x", node="n1")
scene_node = partial(node, "n1", uid="node-uid", resource_version="7", annotations={}, unschedulable=False, taints=[])


def scene_removal(name: str, **fields: Any) -> Removal:
    """What the planner sends for the scene's pod ``name``: an eviction, unless ``fields`` say otherwise."""
    return Removal(**{"namespace": "app", "name": name, "uid": f"uid-{name}", "delete": False, "grace": None, "budget": None, **fields})


def held_node(holder: str = "nm", *, cordoned: bool = True) -> Obj:
    """Node n1 as NodeMaintenance ``holder`` took it: its record, our taint, and cordoned unless someone uncordoned it."""
    return scene_node(holder=holder, was_unschedulable=False, unschedulable=cordoned, taints=[TAINT])


HELD = held_node()
RUNNING = {"phase": "Running", "totalpods": 3, "evictionPods": 3, "drainStartTime": ago(10)}


def maintenance(status: dict[str, Any] | None = None, **fields: Any) -> Maintenance:
    """NodeMaintenance nm of node n1 as the planner reads it; keywords are its other fields (timeout, on_timeout,
    escalation, grace, selector, terms…)."""
    return Maintenance(name="nm", node_name="n1", reason="kernel", status=status or {}, **fields)


def policy_terms(**fields: Any) -> PolicyTerms:
    """What a policy governing n1 makes of a drain step: drain rules (none unless told, yet a policy, so pod annotations
    count), a hold, its conditions and Jobs… (``rules=None``: what the terms say when no policy governs)."""
    return PolicyTerms(**{"rules": (), **fields})


@dataclasses.dataclass(frozen=True)
class Scene:
    """One drain step as the planner is given it: ``maintenance`` and its ``node``, the node's ``pods`` and ``budgets``,
    at ``now``, and ``planner.plan``'s other keywords (``inputs``: attempts, in_flight, daemonsets, lease, members…)."""

    maintenance: Maintenance
    node: Obj | None
    pods: tuple[Obj, ...]
    budgets: tuple[Obj, ...]
    now: datetime.datetime
    inputs: Mapping[str, Any]

    def plan(self) -> Plan:
        return planner.plan(self.maintenance, self.node, list(self.pods), list(self.budgets), self.now, **self.inputs)

    def after(self, result: Plan, changes: Mapping[str, Any]) -> Scene:
        """The step after this one: the maintenance with the status ``result`` left (unless ``changes`` give one), and
        ``changes`` to the node, the pods, the budgets, the time, the maintenance's fields or the other inputs."""
        own: dict[str, Any] = {key: tuple(changes[key]) if key in ("pods", "budgets") else changes[key]
                               for key in ("node", "pods", "budgets", "now") if key in changes}
        named = {f.name for f in dataclasses.fields(Maintenance)}
        fields = {"status": result.status, **{key: value for key, value in changes.items() if key in named}}
        inputs = {key: value for key, value in changes.items() if key not in own and key not in named}
        return dataclasses.replace(self, maintenance=dataclasses.replace(self.maintenance, **fields), inputs={**self.inputs, **inputs},
                                   **own)


def scene(m: Maintenance | None = None, *, node: Obj | None = HELD, pods: Iterable[Obj] = (), budgets: Iterable[Obj] = (),
          now: datetime.datetime = NOW, **inputs: Any) -> Scene:
    """A drain step of ``m`` (``maintenance()`` unless given) on ``node`` (HELD unless given; None: no such node)."""
    return Scene(maintenance=m or maintenance(), node=node, pods=tuple(pods), budgets=tuple(budgets), now=now, inputs=inputs)


@dataclasses.dataclass(frozen=True)
class Again:
    """The step after the one before, with ``changes`` (see :meth:`Scene.after`)."""

    changes: Mapping[str, Any]


def again(**changes: Any) -> Again:
    return Again(changes)


def play(*steps: Scene | Again) -> list[tuple[Scene, Plan]]:
    """Each step with its plan, in turn: an ``Again`` plans the scene before it anew, from the status its plan left."""
    played: list[tuple[Scene, Plan]] = []
    for step in steps:
        if isinstance(step, Again):
            before, result = played[-1]
            step = before.after(result, step.changes)
        played.append((step, step.plan()))
    return played


class Text:
    """In a row's expectations: any text that starts with ``start`` and holds each of ``parts``."""

    def __init__(self, *parts: str, start: str = "") -> None:
        self.parts, self.start = parts, start

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and other.startswith(self.start) and all(part in other for part in self.parts)

    def __hash__(self) -> int:
        return hash((self.parts, self.start))

    def __repr__(self) -> str:
        return f"Text({', '.join(map(repr, self.parts))}{f', start={self.start!r}' if self.start else ''})"


def _lease_seen(result: Plan) -> tuple[str | None, str, str] | None:
    if result.lease_seen is None:
        return None
    shown = remediation.condition(result.lease_seen)
    return result.lease_seen.other, shown.status, shown.reason


# What a table row reads of a plan (and of the scene it was given), by name: the plan's own fields, the status a user
# reads, the events and the removals, each told as the assertions compare them.
READS: dict[str, Callable[[Plan, Scene], Any]] = {
    "phase": lambda p, _: p.phase,
    "holds": lambda p, _: p.holds_node,
    "patch": lambda p, _: p.node_patch,
    "holder": lambda p, _: p.node_patch["metadata"]["annotations"].get(HOLDER) if p.node_patch else None,
    "cordon": lambda p, _: p.node_patch and (p.node_patch["spec"]["unschedulable"], p.node_patch["spec"]["taints"],
                                             p.node_patch["metadata"]["resourceVersion"]),
    "labels": lambda p, _: p.node_patch and p.node_patch["metadata"].get("labels"),
    "removals": lambda p, _: p.removals,
    "evicted": lambda p, _: [r.name for r in p.removals if not r.delete],
    "deleted": lambda p, _: [r.name for r in p.removals if r.delete],
    "paced": lambda p, _: [(r.budget, r.budget_version) for r in p.removals],
    "escalated": lambda p, _: [(r.name, r.escalation, r.grace, ", ".join(r.bypassed) or None) for r in p.removals if r.escalation],
    "events": lambda p, _: [(e.on_node, e.type, e.reason) for e in p.events],
    "told": lambda p, _: [(e.pod, e.reason, e.message) for e in p.events],
    "messages": lambda p, _: [e.message for e in p.events],
    "recheck": lambda p, _: p.recheck_in,
    "drained_after": lambda p, _: p.drained_after,
    "error": lambda p, _: p.status.get("lastError"),
    "progress": lambda p, _: p.status.get("drainProgress"),
    "started": lambda p, _: p.status.get("drainStartTime"),
    "totals": lambda p, _: (p.status.get("totalpods"), p.status.get("evictionPods")),
    "pending": lambda p, _: p.status.get("pendingPods"),
    "pending_refs": lambda p, _: p.status.get("pendingPodsRefs"),
    "conditions": lambda p, _: {c["type"]: (c["status"], c["reason"]) for c in p.status.get("conditions") or []},
    "condition_messages": lambda p, _: {c["type"]: c["message"] for c in p.status.get("conditions") or []},
    "said_by": lambda p, _: sorted(c["type"] for c in p.status.get("conditions") or [] if c["message"] == p.status.get("lastError")),
    "escalated_pods": lambda p, _: p.status.get("escalatedPods"),
    "escalated_names": lambda p, _: [(e["name"], e["action"]) for e in p.status.get("escalatedPods") or []],
    "evicted_workloads": lambda p, _: p.status.get("evictedWorkloads"),
    "timed_out": lambda p, _: timed_out(p.status),
    "updated": lambda p, _: p.status.get("lastUpdate"),
    "handback": lambda p, _: p.handback,
    "claim": lambda p, _: p.lease_claim and (p.lease_claim.create, p.lease_claim.body["spec"]["holderIdentity"]),
    "claimed_before_take": lambda p, _: p.lease_claim is not None and p.lease_claim.before_take,
    "lease_seen": lambda p, _: _lease_seen(p),
    "jobs": lambda p, _: p.jobs,
    "plan": lambda p, _: p,
    # Nothing but the status it was given: a step that does nothing at all.
    "nothing": lambda p, given: p == Plan(phase=p.phase, status=dict(given.maintenance.status)),
}


def row(name: str, *steps: tuple[Scene | Again, dict[str, Any]]) -> Any:
    """A row of a planner table: a named behaviour, its steps, each with what its plan ``shows``."""
    return pytest.param(list(steps), id=name)


def outcomes(steps: Iterable[tuple[Scene | Again, dict[str, Any]]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """What the plan of each step of a row shows, beside what the row says it shows."""
    steps = list(steps)
    return [(seen(given, result, expected), expected) for (given, result), (_, expected) in zip(play(*(s for s, _ in steps)), steps, strict=True)]


def shows(**reads: Any) -> dict[str, Any]:
    """What a row expects a plan to show, by the names of ``READS`` (a name it does not know fails the row at once)."""
    unknown = set(reads) - set(READS)
    assert not unknown, f"no such read: {sorted(unknown)}"
    return reads


def seen(given: Scene, result: Plan, names: Iterable[str]) -> dict[str, Any]:
    """What a row reads of ``result``, planned from ``given``: each of ``names`` (see ``READS``)."""
    return {name: READS[name](result, given) for name in names}


def stamp(seconds_ago: float) -> str:
    """The MicroTime ``seconds_ago`` before NOW, as a Lease's renewTime and acquireTime hold it."""
    return (NOW - datetime.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


worker_1 = partial(node, "Worker-1", uid="u1", resource_version="7", labels={}, annotations={}, spec={})  # the node Lease node-worker-1 names


def lease(holder: str, renewed_ago: float, duration: int = 3600, *, name: str = "node-worker-1", namespace: str = "medik8s-leases",
          resource_version: str = "3", **spec: Any) -> Obj:
    """A remediation Lease (of node Worker-1 unless named otherwise) held by ``holder``, renewed ``renewed_ago`` seconds before NOW."""
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": resource_version},
            "spec": {"holderIdentity": holder, "renewTime": stamp(renewed_ago), "leaseDurationSeconds": duration, **spec}}


# ---------------------------------------------------------------- the runtime's scene
# What the engine's and the policies' watches show: node n1, pods of namespace app bound to it, and
# NodeMaintenances as the reconciler reads them (v1beta1).
runtime_node = partial(node, uid="uid-{name}", resource_version="1", labels={}, annotations={}, spec={}, ready=True)
runtime_pod = partial(pod, namespace="app", uid="uid-{name}", owner_name="rs", node="n1", ready=None)
runtime_nm = partial(nm, version="v1beta1", uid="uid-{name}", generation=1, resource_version="1", created="2026-01-01T00:00:00Z", reason="test")


# ---------------------------------------------------------------- the API
class Call(NamedTuple):
    """One call the code under test made; a watch is recorded with method WATCH."""

    method: str
    path: str
    body: Any = None
    query: dict[str, str] | None = None
    content_type: str | None = None
    timeout: float | None = None  # what the caller bounded the request by


class FakeApi:
    """The operator's API access (a ``KubeApi``, as ``AsyncKube`` is) answered from memory, recording every call in ``calls``.

    - ``request(method, path, *, query, body, content_type, timeout)`` takes the next answer scripted for
      method and path (``script``, ``fail``): an exception is raised, anything else returned. Unscripted,
      a GET answers the object stored in ``objects`` at that path, or for a collection path a listing of
      the objects stored under it (matching a ``labelSelector`` of ``key``, ``key=value``, ``key!=value``
      or ``!key`` terms), else raises NotFound; a write answers its body and changes nothing stored.
    - ``get(path)`` is a GET with None for a missing object; ``patch(path, body, content_type)`` a PATCH.
    - ``watch(path, query, on_open)`` calls ``on_open`` (the server accepted the watch) unless an outage is set,
      then yields the events of the next script queued by ``script_watch``: an
      exception among them is raised when reached, and the end of the list ends the watch as a server
      does. With nothing queued it sets ``idle`` and waits until cancelled.
    - ``answer_by(method, path, answering)`` answers the unscripted calls of ``method`` to ``path`` by their body.
    - ``outage``, while set, is raised by every call: an API server away or failing.
    - ``calls`` holds a ``Call`` (method, path, body, query, content_type) per call; ``calls_to``,
      ``writes`` and ``remaining`` read them and what is left of the script.
    - ``blocking()`` is the same fake with blocking methods (a ``BlockingKubeApi``, as ``Kube`` is), for
      admission and leader election: calls, scripts and objects are shared.
    - ``credentials`` name a server no test reaches, and ``may_write`` always says yes: kopf's session is made
      from them, and no unit test sends through it.

    Answers are deep copies: what the code under test changes never changes the script or the store.
    """

    def __init__(self, objects: dict[str, Obj] | None = None) -> None:
        self.objects: dict[str, Obj] = dict(objects or {})
        self.calls: list[Call] = []
        self.credentials = Credentials(server="https://api.invalid")
        self.may_write: Callable[[], bool] = lambda: True
        self.outage: BaseException | None = None
        self.idle = asyncio.Event()
        self._answers: dict[tuple[str, str], deque[Any]] = {}
        self._watches: dict[str, deque[list[Any]]] = {}
        self._answering: dict[tuple[str, str], Callable[[Any], Obj]] = {}

    # ------------------------------------------------ what a test says
    def script(self, method: str, path: str, *answers: Any) -> None:
        """The answers of the next calls of ``method`` to ``path``, one per call: objects, or exceptions to raise."""
        self._answers.setdefault((method, path), deque()).extend(answers)

    def answer_by(self, method: str, path: str, answering: Callable[[Any], Obj]) -> None:
        """Answer every unscripted call of ``method`` to ``path`` with what ``answering`` makes of its body: a server
        that decides (a SubjectAccessReview's answer, say)."""
        self._answering[(method, path)] = answering

    def fail(self, method: str, path: str, error: BaseException, *, times: int = 1) -> None:
        """Make the next ``times`` calls of ``method`` to ``path`` raise ``error``."""
        self.script(method, path, *[error] * times)

    def script_watch(self, path: str, *watches: list[Any]) -> None:
        """What the next watches of ``path`` send, one list of events (or exceptions) per watch request."""
        self._watches.setdefault(path, deque()).extend(list(events) for events in watches)

    def remaining(self, method: str, path: str) -> list[Any]:
        """What is scripted and not yet taken: answers for ``method`` and ``path``, or watches for WATCH."""
        return list(self._watches.get(path, ()) if method == "WATCH" else self._answers.get((method, path), ()))

    def calls_to(self, method: str, path: str | None = None) -> list[Call]:
        return [call for call in self.calls if call.method == method and path in (None, call.path)]

    def writes(self) -> list[tuple[str, str]]:
        """Method and path of every call that writes, in order."""
        return [(call.method, call.path) for call in self.calls if call.method not in ("GET", "WATCH")]

    def blocking(self) -> BlockingFakeApi:
        return BlockingFakeApi(self)

    # ------------------------------------------------ what the code under test calls
    async def request(self, method: str, path: str, *, query: dict[str, str] | None = None, body: Any = None,
                      content_type: str | None = None, timeout: float | None = None) -> Obj:  # noqa: ASYNC109 - AsyncKube's signature
        return self.answer(method, path, query, body, content_type, timeout)

    async def get(self, path: str) -> Obj | None:
        try:
            return await self.request("GET", path)
        except NotFound:
            return None

    async def patch(self, path: str, body: Obj, content_type: str | None = None) -> Obj:
        return await self.request("PATCH", path, body=body, content_type=content_type)

    async def watch(self, path: str, query: dict[str, str], on_open: Callable[[], None] | None = None) -> AsyncIterator[Obj]:
        self.calls.append(Call("WATCH", path, query=dict(query)))
        if self.outage is not None:
            raise self.outage
        if on_open:
            on_open()
        queued = self._watches.get(path)
        if not queued:
            self.idle.set()
            await asyncio.Event().wait()
            return
        for event in queued.popleft():
            if isinstance(event, BaseException):
                raise event
            yield copy.deepcopy(event)

    # ------------------------------------------------ answering
    def answer(self, method: str, path: str, query: dict[str, str] | None, body: Any, content_type: str | None,
                timeout: float | None = None) -> Obj:
        self.calls.append(Call(method, path, body, dict(query) if query is not None else None, content_type, timeout))
        if self.outage is not None:
            raise self.outage
        queued = self._answers.get((method, path))
        if queued:
            answer = queued.popleft()
            if isinstance(answer, BaseException):
                raise answer
            return copy.deepcopy(answer)
        if (method, path) in self._answering:
            return copy.deepcopy(self._answering[(method, path)](copy.deepcopy(body)))
        if method != "GET":
            return copy.deepcopy(body) if isinstance(body, dict) else {}
        if path in self.objects:
            return copy.deepcopy(self.objects[path])
        if _is_collection(path):
            selector = (query or {}).get("labelSelector", "")
            items = [obj for stored, obj in self.objects.items() if _in_collection(stored, path) and labels_match(selector, obj)]
            return {"metadata": {"resourceVersion": "1"}, "items": copy.deepcopy(items)}
        kind, name = path.rstrip("/").split("/")[-2:]  # as the API server says of a missing object
        raise NotFound(404, "NotFound", f"{kind} {name!r} not found", {"kind": kind, "name": name})


class BlockingFakeApi:
    """A ``FakeApi`` seen through blocking calls (a ``BlockingKubeApi``), as admission and leader election make them
    (from a thread)."""

    def __init__(self, api: FakeApi) -> None:
        self.api = api

    def request(self, method: str, path: str, *, query: dict[str, str] | None = None, body: Any = None,
                content_type: str | None = None, timeout: float | None = None) -> Obj:
        return self.api.answer(method, path, query, body, content_type, timeout)

    def get(self, path: str, **query: str) -> Obj | None:
        try:
            return self.request("GET", path, query=query or None)
        except NotFound:
            return None

    def patch(self, path: str, body: Obj, content_type: str | None = None) -> Obj:
        return self.request("PATCH", path, body=body, content_type=content_type)


def watched(name: str, version: str, namespace: str = "ns") -> Obj:
    """An object as a listing or a watch sends it: what a Mirror keys and resumes on, and managedFields, which it drops."""
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": version, "managedFields": [{"manager": "x"}]}}


def script_watch_scene(api: FakeApi, path: str, *, expire: bool = True) -> None:
    """The watch tests' scene at ``path``: a listing at version 10 of ns/a; a watch that adds ns/b and other/d,
    deletes ns/a and other/d and bookmarks 13; then (``expire``) a watch that fails 410 Gone, and a second
    listing, at 20, of ns/c."""
    api.script("GET", path, {"metadata": {"resourceVersion": "10"}, "items": [watched("a", "9")]})
    api.script_watch(path, [{"type": "ADDED", "object": watched("b", "11")}, {"type": "ADDED", "object": watched("d", "11", "other")},
                            {"type": "DELETED", "object": watched("a", "12")}, {"type": "DELETED", "object": watched("d", "12", "other")},
                            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "13"}}}])
    if expire:
        api.script("GET", path, {"metadata": {"resourceVersion": "20"}, "items": [watched("c", "19")]})
        api.script_watch(path, [Gone(410, "Expired", "too old resource version")])


def _is_collection(path: str) -> bool:
    """/api/v1/<plural>, /api/v1/namespaces/<ns>/<plural>, /apis/<group>/<version>/… alike: an odd count of segments after the version."""
    parts = path.strip("/").split("/")
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    return len(rest) % 2 == 1


def _in_collection(stored: str, collection: str) -> bool:
    """Whether an object stored at ``stored`` is listed at ``collection``, a namespaced kind's all-namespaces path included."""
    parent = stored.rsplit("/", 1)[0]
    if parent == collection:
        return True
    parts = parent.split("/")
    if "namespaces" in parts[:-1]:
        at = len(parts) - 3  # …/namespaces/<ns>/<plural>
        return at >= 0 and parts[at] == "namespaces" and "/".join(parts[:at] + parts[at + 2:]) == collection
    return False


# ------------------------------------------------ the seam and the engine's own watches
def seen_by_policies(node: Obj | None, verdict: Verdict | None = None, *, listed: bool = True, selected: bool = True, operator_namespace: str = "nmo",
         pre_drain_job: Obj | None = None) -> Seen:
    """What served, readable policies know of a maintenance whose node is ``node``: the decision's ``verdict`` on it."""
    return Seen(node=node, served=True, synced=True, verdict=verdict, listed=listed, selected=selected, operator_namespace=operator_namespace,
                pre_drain_job=pre_drain_job)


def own_node(engine: Engine) -> Mirror:
    """The engine's own watch of its node (one stands in for it in a test: see ``stand_in_watches``)."""
    assert engine.watches.node is not None, "the engine watches its node"
    return engine.watches.node


def own_pods(engine: Engine) -> Mirror:
    assert engine.watches.pods is not None, "the engine watches its node's pods"
    return engine.watches.pods


def stand_in_watches(engine: Engine, node: Obj, pods: Iterable[Obj]) -> None:
    """The engine as it is once it watches its node and pods, these standing in for what its watches listed."""
    watches = engine.watches
    watches.mode = engine.wanted = WatchMode.NODE_AND_PODS
    watches.node, watches.pods = watches.node_mirror(), watches.pods_mirror()
    watches.node.objects = {f"/{node['metadata']['name']}": node}
    watches.pods.objects = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in pods}


def unreachable_api() -> BlockingFakeApi:
    """API access for code given a ``Kube`` when no API server answers: every call raises Unreachable."""
    api = FakeApi()
    api.outage = Unreachable("no API server in this test")
    return api.blocking()
