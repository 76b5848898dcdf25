"""The nodes still recovering, reckoned from what happened rather than from what the operator wrote down.

A node given back under a policy's waitForHealthy keeps its slot until the workloads its drain evicted are healthy
again or waitForHealthySeconds have passed since. The operator keeps that list in the policy's status.recovering; a
write it skips or loses (a hand-back by timeout that records nothing, an entry dropped by a race, evictions recorded
after they were done and then lost) would leave the list short, and a count read from it would be short alike. So the
limits count these nodes too, found by walking the history:

- a drain's removals name the workloads of the pods removed (as the operator's ``drain.evicted.workloads_of`` defines
  them: the budgets covering a pod, else the ReplicaSet or StatefulSet owning it), under a policy or none: a node
  relabelled into a pool that waits for health, or waitForHealthy switched on, while it is held waits for them too;
- the node patch that removes the holder record gives the node back: from then on it recovers, waiting for those
  workloads and for any an earlier hand-back of the node still waited for (a node maintained again while recovering);
- the recovery ends the first time every workload is healthy at a step's start or end (``policy.health.unhealthy``),
  once its cap has passed since the start of the step that gave it back, counted on the steps' own time (the operator
  counts it on its monotonic clock, from when it sees the node given back: a wall clock set forward, between steps,
  ends no wait), or when its policy is gone, replaced or stops waiting for health (its entry goes with it). A take in
  the newest step is judged against the recoveries still under way when it was written: one whose workloads were all
  healthy by then (each as the step's end shows it, and written before the take) had ended.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from node_maintenance.drain import budgets
from node_maintenance.drain.evicted import Workload, workloads_of
from node_maintenance.policy import health, model
from simulation import counting
from simulation.history import ActionKind, History, State, Step
from simulation.recovery import workload_object


@dataclass(frozen=True)
class Recovering:
    """A node given back under ``policy`` (its uid), waiting for ``workloads``."""

    policy: str
    uid: str
    given: float  # the start of the step that gave it back, in seconds of the steps' own time since the history began
    cap: int
    workloads: frozenset[Workload]


def recovering(history: History, until: int = 0) -> dict[str, set[str]]:
    """The nodes recovering when the newest step began, by the name of the policy that waits for them; with ``until``, the
    revision of a write of the newest step (a take), those still recovering just before it: a recovery whose workloads
    were all healthy then (as the step's end shows them, unchanged since) ended within the step. A sufficient sign, not
    the whole rule: a workload deleted, or written again after the take, still counts as not healthy here."""
    drained: dict[str, set[Workload]] = {}  # node → the workloads its current holder's drain removed pods of
    ongoing: dict[str, Recovering] = {}
    started = 0.0  # the step's start, in seconds of the steps' own time
    for st in history[:-1]:
        _drain(st, drained)
        for node, given in _given_back(st, started, drained, ongoing).items():
            ongoing[node] = given
        started += st.seconds()
        ongoing = {node: r for node, r in ongoing.items() if not _ended(r, st, started)}
    # What was written between the last step and this one (a rule's edit of the policy) is in this step's start: an
    # edit that stops the wait ends it before this step, as the operator, told of it, may act on it within the step.
    ongoing = {node: r for node, r in ongoing.items() if not _stops_waiting(r, history[-1].before)}
    if until:
        ongoing = {node: r for node, r in ongoing.items() if not _healthy_before(r, history[-1].after, until)}
    found: dict[str, set[str]] = {}
    for node, r in ongoing.items():
        found.setdefault(r.policy, set()).add(node)
    return found


def _drain(st: Step, drained: dict[str, set[Workload]]) -> None:
    """Adds the workloads of the pods this step removed to their node's drain; a take starts a new drain."""
    for take in st.takes():
        drained[take.node] = set()
    for action in st.of_kind(ActionKind.EVICTION, ActionKind.POD_DELETE):
        pod = st.before.pods.get(action.key) or st.after.pods.get(action.key)
        node = ((pod or {}).get("spec") or {}).get("nodeName")
        if pod is None or node is None:
            continue
        covering = [key for key, budget in st.before.budgets.items() if budgets.covers(dict(budget), dict(pod))]
        drained.setdefault(node, set()).update(workloads_of(covering, pod))


def _waiting_policies(state: State, node: str) -> list[model.Policy]:
    governing = set(counting.governed_by(state, node))
    return [p for p in counting.policies(state) if p.name in governing and p.wait_for_healthy]


def _given_back(st: Step, started: float, drained: dict[str, set[Workload]], ongoing: Mapping[str, Recovering]) -> dict[str, Recovering]:
    """The nodes this step (begun at ``started``) gave back, each recovering under the first policy governing it that
    waits for health."""
    found = {}
    for node in st.gives_back():
        workloads = drained.pop(node, set())
        policies = _waiting_policies(st.before, node)
        if not policies:
            continue
        policy = policies[0]
        earlier = ongoing.get(node)
        if earlier is not None and earlier.policy == policy.name:
            workloads |= earlier.workloads
        if workloads:
            uid = str((st.before.policies[policy.name].get("metadata") or {}).get("uid", ""))
            found[node] = Recovering(policy.name, uid, started, policy.wait_for_healthy_seconds, frozenset(workloads))
    return found


def _ended(r: Recovering, st: Step, ended: float) -> bool:
    """Whether the recovery has ended by the step's end (``ended``): the whole of the step that gave the node back
    counts, the operator having seen it given back no sooner."""
    if _stops_waiting(r, st.after):
        return True
    if ended - r.given >= r.cap:
        return True
    return any(not any(health.unhealthy(w, workload_object(state, w)) for w in r.workloads) for state in (st.before, st.after))


def _healthy_before(r: Recovering, state: State, revision: int) -> bool:
    """Whether every workload ``r`` waits for is healthy in ``state``, each as last written before ``revision``."""
    objects = [(w, workload_object(state, w)) for w in r.workloads]
    return all(obj is not None and int(obj["metadata"].get("resourceVersion") or 0) < revision and not health.unhealthy(w, obj)
               for w, obj in objects)


def _stops_waiting(r: Recovering, state: State) -> bool:
    """Whether, as ``state`` shows it, the policy ``r`` waits under is gone, replaced or no longer waits for health."""
    body = state.policies.get(r.policy)
    return body is None or str((body.get("metadata") or {}).get("uid", "")) != r.uid or not model.Policy.of(body).wait_for_healthy
