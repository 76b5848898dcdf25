"""The policies at run time against a fake API: a queue read without a write, and failing closed. Only a
404 of the policy CRD means that no policy applies; any other failed read, or watches not yet listed,
keep every maintenance that has not taken its node waiting, and one that has keeps the rules last read.
A postMaintenance Job that would run as the operator is never created, and the node is kept with the reason."""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Any

import prometheus_client
import pytest

from node_maintenance.api import SERVICE_ACCOUNT, timestamps
from node_maintenance.api.paths import POLICY_CRD, POLICY_VERSION, jobs_path, nm_path, node_path, pod_path, policy_path
from node_maintenance.client import watch
from node_maintenance.client.errors import Conflict, Forbidden, NotFound, ServerError, TooManyRequests, Unreachable
from node_maintenance.drain import nodes, planner
from node_maintenance.drain.memory import WatchMode
from node_maintenance.drain.plans import Maintenance, PolicyTerms
from node_maintenance.drain.rules import Behavior
from node_maintenance.policy import health, hooks, line, terms
from node_maintenance.policy.terms import UNKNOWN_RECHECK_SECONDS
from node_maintenance.policy.verdicts import VerdictKind
from node_maintenance.runtime import giving_back
from node_maintenance.runtime.budget_watch import BudgetWatch
from node_maintenance.runtime.cordoned import CordonedNodes
from node_maintenance.runtime.engine import Engine, Shared
from node_maintenance.runtime.executor import Executor
from node_maintenance.runtime.maintenances import FINALIZER, Maintenances
from node_maintenance.runtime.metrics import Active
from node_maintenance.runtime.policies import decisions
from node_maintenance.runtime.policies.unseen import DEPARTED_GRACE_SECONDS
from node_maintenance.runtime.policies.view import Policies
from node_maintenance.runtime.policies.watches import PolicyWatches, Watched
from simulation.clock import SimulatedTime
from tests.unit.builders import FakeApi, budget, nm_policy, own_pods, policy_hook, runtime_nm, runtime_node, runtime_pod, stand_in_watches

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
CRD = {"metadata": {"name": POLICY_CRD.rsplit("/", 1)[1]}, "spec": {"versions": [{"name": POLICY_VERSION, "served": True}]},
       "status": {"conditions": [{"type": "Established", "status": "True"}]}}
SKIP = {"podSelector": {"matchLabels": {"app": "cache"}}, "behavior": "Skip"}
# Five nodes of one pool under maxParallel 1: nm-n1 holds n1, the other four wait in line.
POOL = [f"n{i}" for i in range(1, 6)]


def pool_api(**spec: Any) -> FakeApi:
    policy = nm_policy("pool", generation=1, resource_version="1", node_selector={"matchLabels": {"pool": "a"}}, maxParallel=1, drainRules=[SKIP], **spec)
    objects: dict[str, Any] = {POLICY_CRD: CRD, policy_path("pool"): policy}
    for i, name in enumerate(POOL):
        node = runtime_node(name, labels={"pool": "a"})
        if name == "n1":
            node["metadata"]["annotations"] = {nodes.HOLDER: "nm-n1"}
        objects[node_path(name)] = node
        objects[nm_path(f"nm-{name}")] = runtime_nm(f"nm-{name}", name, created=f"2026-01-01T00:0{i}:00Z")
    return FakeApi(objects)


def gate_of(policies: Policies, api: FakeApi, name: str) -> Maintenance:
    """One drain step's view of nm-<name> under the policies, as the engine takes it."""
    body = api.objects[nm_path(f"nm-{name}")]
    return terms.maintenance(body, policies.seen(body, api.objects[node_path(name)], NOW), {}, NOW)


def queued_reason(step: Maintenance) -> str:
    waiting = step.terms.waiting
    assert waiting is not None, step
    assert waiting.node_patch is None and not waiting.removals, "a waiting maintenance touches nothing"
    return str(next(c for c in planner.plan(step, None, [], [], NOW).status["conditions"] if c["type"] == "Queued")["reason"])


def watches_of(policies: Policies) -> PolicyWatches:
    assert policies.watches is not None, "the policies are served"
    return policies.watches


async def listed(policies: Policies) -> None:
    """Every watch of the policies has listed."""
    await asyncio.gather(*(m.synced.wait() for m in watches_of(policies).mirrors.values()))


async def write_statuses(policies: Policies) -> None:
    assert policies.publisher is not None, "the policies are served"
    await policies.publisher.write()


def handing_back(api: FakeApi) -> Executor:
    """The executor a deletion of nm-n1 carries out its hand-back with (in v1beta1)."""
    return giving_back.executor(api, api.objects[nm_path("nm-n1")], "v1beta1", lambda *_: None, logging.LoggerAdapter(logging.getLogger("test"), {}))


def scenario(api: FakeApi, body: Callable[[Policies], Awaitable[None]]) -> None:
    async def run() -> None:
        policies = Policies(api, "operator-ns", lambda _names: None)
        try:
            await asyncio.wait_for(body(policies), 10)
        finally:
            await policies.stop()
    asyncio.run(run())


def lines_decided(policy: str) -> float:
    """How many times the policy's line was decided in this process, as /metrics says."""
    return prometheus_client.REGISTRY.get_sample_value("node_maintenance_policy_lines_decided_total", {"policy": policy}) or 0.0


async def read(policies: Policies) -> None:
    """One look at the CRD, and its watches listed."""
    await policies.look()
    await listed(policies)


async def read_until_failed(policies: Policies, kind: Watched) -> watch.Mirror:
    """The CRD read and the watches listed, then the watch of ``kind`` failed (its script's error): its mirror. The retry
    is not reached within a test (``RETRY_FIRST_SECONDS`` patched): ``opened()`` stands for the next accepted watch."""
    await read(policies)
    mirror = watches_of(policies).mirrors[kind]
    while not mirror.failure:  # noqa: ASYNC110 - a failed watch signals nobody; it is only read
        await asyncio.sleep(0.01)
    return mirror


def test_a_queued_maintenance_is_told_to_wait_and_the_gate_writes_nothing() -> None:
    api = pool_api()

    async def body(policies: Policies) -> None:
        await read(policies)
        calls = list(api.calls)
        assert queued_reason(gate_of(policies, api, "n2")) == "WaitingForSlot"
        assert api.calls == calls  # the gate only reads what the watches hold
    scenario(api, body)


@pytest.mark.parametrize("error", [ServerError(503, "ServiceUnavailable", "the server is shutting down"),
                                   TooManyRequests(429, "TooManyRequests", "too many requests", 1.0),
                                   Forbidden(403, "Forbidden", "cannot get customresourcedefinitions"),
                                   Unreachable("connection reset")], ids=type)
def test_an_error_reading_the_crd_keeps_the_queue_closed_and_the_running_drain_its_rules(error: Exception) -> None:
    api = pool_api()

    async def body(policies: Policies) -> None:
        await read(policies)
        api.fail("GET", POLICY_CRD, error)
        await policies.look()
        why = policies.unknown()
        assert "could not be read" in why and str(error) in why
        for name in POOL[1:]:  # none of the four in line takes its node
            gate = gate_of(policies, api, name)
            assert queued_reason(gate) == "WaitingForPolicies" and str(error) in planner.plan(gate, None, [], [], NOW).status["conditions"][0]["message"]
        running = gate_of(policies, api, "n1")  # the holder keeps the policy's rules
        assert running.terms.waiting is None and running.terms.rules is not None
        assert [r.behavior for r in running.terms.rules] == [Behavior.SKIP]
        await policies.look()  # the next read succeeds: the queue is as it was
        assert policies.unknown() == "" and queued_reason(gate_of(policies, api, "n2")) == "WaitingForSlot"
    scenario(api, body)


def test_only_a_404_of_the_crd_means_no_policy_applies() -> None:
    api = pool_api()

    async def body(policies: Policies) -> None:
        await read(policies)
        del api.objects[POLICY_CRD]
        await policies.look()
        assert policies.absent and not policies.served and policies.unknown() == ""
        assert gate_of(policies, api, "n2").terms == PolicyTerms()
    scenario(api, body)


def test_nothing_is_taken_and_nothing_evicted_before_the_policies_are_read() -> None:
    api = pool_api()

    async def body(policies: Policies) -> None:
        assert queued_reason(gate_of(policies, api, "n2")) == "WaitingForPolicies"
        holder = gate_of(policies, api, "n1")  # taken before a restart: it keeps the node and evicts nothing
        assert holder.terms.waiting is None and "NodeMaintenancePolicies" in holder.terms.hold
        with pytest.raises(giving_back.Later, match="NodeMaintenancePolicies are read"):
            await giving_back.before(policies, api.objects[nm_path("nm-n1")], handing_back(api))
    scenario(api, body)


def test_watches_not_listed_yet_keep_every_maintenance_waiting_until_they_are() -> None:
    api = pool_api()
    api.outage = Unreachable("connection refused")

    async def body(policies: Policies) -> None:
        await policies.look()
        assert not policies.served and policies.unknown() == "the NodeMaintenancePolicy CRD could not be read: connection refused"
        api.outage = None
        await policies.look()  # the CRD is read, its watches are not listed yet
        assert "have not been listed yet" in policies.unknown()
        assert queued_reason(gate_of(policies, api, "n2")) == "WaitingForPolicies"
        assert gate_of(policies, api, "n1").terms.hold
        await listed(policies)
        assert policies.unknown() == "" and queued_reason(gate_of(policies, api, "n2")) == "WaitingForSlot"
    scenario(api, body)


def test_a_failed_watch_keeps_the_queue_closed_until_the_server_accepts_a_watch_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch, "RETRY_FIRST_SECONDS", 3600.0)  # the retry is not reached during the test
    api = pool_api()
    api.script_watch(node_path(), [Unreachable("the connection was dropped")])

    async def body(policies: Policies) -> None:
        nodes_watch = await read_until_failed(policies, Watched.NODES)
        assert policies.unknown() == "the watch of nodes failed: the connection was dropped"
        assert queued_reason(gate_of(policies, api, "n2")) == "WaitingForPolicies"
        assert gate_of(policies, api, "n1").terms.rules is not None  # the holder keeps its rules
        nodes_watch.opened()
        assert policies.unknown() == "" and queued_reason(gate_of(policies, api, "n2")) == "WaitingForSlot"
    scenario(api, body)


def test_a_slot_decided_while_a_watch_has_failed_is_not_kept_once_the_watch_is_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The policies' status is written while the watch of NodeMaintenances is down: the decision it shows admits nm-n2,
    the oldest the watch had shown. nm-n1, older, was created meanwhile; once the watch is back it is first in line,
    and nm-n2 waits (a search's Killed machine, on an earlier code: nm-n2 kept the grant made blind and overtook it)."""
    monkeypatch.setattr(watch, "RETRY_FIRST_SECONDS", 3600.0)  # the retry is not reached during the test
    api = pool_api()
    api.objects[node_path("n1")]["metadata"]["annotations"] = {}
    older = api.objects.pop(nm_path("nm-n1"))
    api.script_watch(nm_path(), [Unreachable("the connection was dropped")])

    async def body(policies: Policies) -> None:
        maintenances = await read_until_failed(policies, Watched.MAINTENANCES)
        await write_statuses(policies)
        api.objects[nm_path("nm-n1")] = older
        policies.feed(Watched.MAINTENANCES, "ADDED", older)
        maintenances.opened()
        assert queued_reason(gate_of(policies, api, "n2")) == "WaitingForSlot"
        assert gate_of(policies, api, "n1").terms.waiting is None
    scenario(api, body)


def test_a_post_maintenance_job_is_created_in_its_hook_s_namespace_and_found_there_by_the_cluster_wide_watch() -> None:
    api = pool_api(postMaintenance=policy_hook("storage-hooks"))

    async def body(policies: Policies) -> None:
        await read(policies)
        assert watches_of(policies).mirrors[Watched.JOBS].query == {"labelSelector": hooks.HOOK_LABEL}
        with pytest.raises(giving_back.Later) as waiting:
            await giving_back.before(policies, api.objects[nm_path("nm-n1")], handing_back(api))
        [created] = api.calls_to("POST", jobs_path("storage-hooks"))
        assert created.body["metadata"]["namespace"] == "storage-hooks" and "storage-hooks/nm-post-maintenance-" in str(waiting.value)
        assert api.calls_to("POST", jobs_path("operator-ns")) == []
        done = {**created.body, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
        policies.feed(Watched.JOBS, "ADDED", done)
        await giving_back.before(policies, api.objects[nm_path("nm-n1")], handing_back(api))  # succeeded: given back
    scenario(api, body)


def test_under_an_older_bundle_hook_jobs_are_watched_in_the_operator_s_namespace_alone() -> None:
    async def run() -> None:
        policies = Policies(pool_api(), "operator-ns", lambda _names: None, jobs_namespace="operator-ns")
        try:
            await read(policies)
            jobs = watches_of(policies).mirrors[Watched.JOBS]
            assert (jobs.path, jobs.query) == (jobs_path("operator-ns"), {"labelSelector": hooks.HOOK_LABEL})
        finally:
            await policies.stop()
    asyncio.run(run())


@pytest.mark.parametrize("namespace", [None, "operator-ns"])
def test_a_post_maintenance_hook_without_a_namespace_or_in_the_operator_s_is_not_run_and_the_node_is_kept(namespace: str | None) -> None:
    api = pool_api(postMaintenance=policy_hook(namespace))

    async def body(policies: Policies) -> None:
        await read(policies)
        with pytest.raises(giving_back.Later) as held:
            await giving_back.before(policies, api.objects[nm_path("nm-n1")], handing_back(api))
        assert "spec.postMaintenance.namespace" in str(held.value) and not [c for c in api.calls if c.method == "POST" and "/jobs" in c.path]
    scenario(api, body)


def test_a_post_maintenance_job_that_would_run_as_the_operator_is_not_created_and_the_node_is_kept() -> None:
    api = pool_api(postMaintenance=policy_hook(serviceAccount=SERVICE_ACCOUNT))

    async def body(policies: Policies) -> None:
        await read(policies)
        with pytest.raises(giving_back.Later) as held:
            await giving_back.before(policies, api.objects[nm_path("nm-n1")], handing_back(api))
        assert "spec.postMaintenance.jobTemplate.spec.template.spec.serviceAccount names the operator's ServiceAccount" in str(held.value)
        assert api.calls_to("POST", jobs_path("storage-hooks")) == [] and api.calls_to("POST", jobs_path("operator-ns")) == []
        [patch] = api.calls_to("PATCH", nm_path("nm-n1", version="v1beta1", subresource="status"))
        condition = next(c for c in patch.body["status"]["conditions"] if c["type"] == "PostMaintenance")
        assert (condition["status"], condition["reason"], condition["message"]) == ("False", "JobFailed", str(held.value))
    scenario(api, body)


def test_a_404_of_a_path_not_served_yet_is_no_proof_that_the_crd_is_absent() -> None:
    # An API server starting serves its paths before it installs the CRD routes: a 404 there says nothing of the CRD.
    api = pool_api()

    async def body(policies: Policies) -> None:
        await read(policies)
        api.fail("GET", POLICY_CRD, NotFound(404, "NotFound", "the server could not find the requested resource"))
        await policies.look()
        assert not policies.absent and policies.served and "could not find the requested resource" in policies.unknown()
        assert queued_reason(gate_of(policies, api, "n2")) == "WaitingForPolicies"
    scenario(api, body)


def test_a_queued_maintenance_opens_no_watch_and_one_with_its_slot_watches_its_node_and_pods() -> None:
    api = pool_api()
    api.objects[pod_path("app", "web-0")] = runtime_pod("web-0")  # on n1, which nm-n1 holds: its drain goes on
    posted: list[str] = []

    def engine_of(policies: Policies, name: str) -> Engine:
        shared = Shared(api, BudgetWatch(api), CordonedNodes(api), Active(), "v1beta1", lambda _o, _t, reason, _m: posted.append(reason),
                        policies=policies)
        body = api.objects[nm_path(f"nm-{name}")]
        return Engine(shared, lambda: body, logging.LoggerAdapter(logging.getLogger("test"), {}), exists=lambda holder: holder == "nm-n1")

    def own_watches(name: str) -> list[str]:
        return [call.query["fieldSelector"] for call in api.calls_to("WATCH") if call.query and
                call.query.get("fieldSelector") in (f"metadata.name={name}", f"spec.nodeName={name}")]

    async def body(policies: Policies) -> None:
        await read(policies)
        queued, holding = engine_of(policies, "n3"), engine_of(policies, "n1")
        await queued.step()
        assert queued.wanted == WatchMode.NOTHING and own_watches("n3") == [], "a maintenance waiting in line watches nothing of its own"
        assert [c for c in api.calls if c.query and "spec.nodeName=n3" in c.query.values()] == []  # nor lists its pods
        written = api.calls_to("PATCH", nm_path("nm-n3", subresource="status"))[-1].body["status"]
        assert written["phase"] == "Pending" and any(c["reason"] == "WaitingForSlot" for c in written["conditions"])
        # The one holding its node wants its own watches, and its run opens them before it plans again.
        assert await holding.step() == 0.0 and holding.wanted == WatchMode.NODE_AND_PODS
        try:
            await holding.watch(holding.wanted)
            assert sorted(own_watches("n1")) == ["metadata.name=n1", "spec.nodeName=n1"]
        finally:
            await holding.watch(WatchMode.NOTHING)
    scenario(api, body)


def test_a_maintenance_whose_policies_are_not_read_yet_holds_without_a_watch_of_its_own() -> None:
    # In doubt, hold: before the policies' first look nothing says whether a policy governs the node (nor whether
    # this maintenance holds it), so the engine neither watches, writes nor takes anything, and looks again later.
    api = pool_api()

    async def body(policies: Policies) -> None:
        shared = Shared(api, BudgetWatch(api), CordonedNodes(api), Active(), "v1beta1", lambda *_: None, policies=policies)
        nm_body = api.objects[nm_path("nm-n3")]
        engine = Engine(shared, lambda: nm_body, logging.LoggerAdapter(logging.getLogger("test"), {}), exists=lambda _: False)
        assert await engine.step() == UNKNOWN_RECHECK_SECONDS
        assert engine.wanted == WatchMode.NOTHING and api.calls == []
    scenario(api, body)


def test_a_burst_of_changes_is_decided_once_and_told_at_once() -> None:
    """A thousand NodeMaintenances created at once, or many nodes changing together, cost one decision per turn
    of the loop, not one per change: the watches' events of one read are decided together."""
    api, told = pool_api(), list[Collection[str] | None]()

    async def run() -> None:
        policies = Policies(api, "operator-ns", told.append)
        try:
            await read(policies)
            policies.decisions.decision()
            await asyncio.sleep(0)
            told.clear()
            before = lines_decided("pool")
            for name in POOL:
                relabelled = dict(api.objects[node_path(name)], metadata={"name": name, "labels": {"pool": "a", "rack": name}})
                policies.feed(Watched.NODES, "MODIFIED", relabelled)
            assert lines_decided("pool") == before and told == []  # nothing yet: more may come in the same turn
            await asyncio.sleep(0)
            # The pool's line decided once, and each node's maintenance told once.
            assert lines_decided("pool") == before + 1 and told == [sorted(f"nm-{name}" for name in POOL)]
        finally:
            await policies.stop()
    asyncio.run(run())


def test_a_change_in_one_pool_re_decides_only_that_pool() -> None:
    """A fleet's decision costs what changed: a node or a NodeMaintenance of one pool decides that pool's line again,
    and the other pool's decision is kept; a node moving between pools decides both, and so does a change of a policy.
    Whatever was decided again, the verdicts are those of a decision of the whole cluster made afresh."""
    api = pool_api()
    api.objects[policy_path("other")] = nm_policy("other", generation=1, resource_version="1", node_selector={"matchLabels": {"pool": "b"}}, maxParallel=1)
    for name in ("m1", "m2"):
        api.objects[node_path(name)] = runtime_node(name, labels={"pool": "b"})
        api.objects[nm_path(f"nm-{name}")] = runtime_nm(f"nm-{name}", name, created="2026-01-01T01:00:00Z")

    async def run() -> None:
        policies = Policies(api, "operator-ns", lambda _names: None)
        decisions = policies.decisions
        try:
            await read(policies)
            decisions.decision()

            def after(kind: Watched, obj: dict[str, Any]) -> dict[str, float]:
                """Which pools one change decided again, once the decision is asked for."""
                before = {policy: lines_decided(policy) for policy in ("pool", "other")}
                policies.feed(kind, "MODIFIED" if kind != Watched.MAINTENANCES or f"/{obj['metadata']['name']}" in watches_of(policies).objects(kind) else "ADDED", obj)
                verdicts = decisions.decision().verdicts
                watches = watches_of(policies)
                afresh = line.decide(watches.policies(), watches.objects(Watched.NODES).values(), watches.objects(Watched.MAINTENANCES).values(),
                                     {name: v.policy.name for name, v in verdicts.items() if v.kind == VerdictKind.ADMITTED and v.policy is not None},
                                     now=timestamps.now())
                assert {n: (v.kind, v.position) for n, v in verdicts.items()} == {n: (v.kind, v.position) for n, v in afresh.verdicts.items()}
                return {policy: lines_decided(policy) - count for policy, count in before.items() if lines_decided(policy) != count}

            assert decisions.decision().verdicts["nm-m1"].kind == VerdictKind.ADMITTED
            assert after(Watched.NODES, runtime_node("m2", labels={"pool": "b"}, unschedulable=True)) == {"other": 1}
            assert after(Watched.NODES, runtime_node("n3", labels={"pool": "a", "zone": "z"})) == {"pool": 1}
            assert after(Watched.MAINTENANCES, runtime_nm("nm-n3b", "n3", created="2026-01-01T02:00:00Z")) == {"pool": 1}
            assert after(Watched.NODES, runtime_node("n4", labels={"pool": "b"})) == {"pool": 1, "other": 1}  # moved between pools
            moved = decisions.decision().verdicts["nm-n4"].policy
            assert moved is not None and moved.name == "other"
            changed = nm_policy("other", generation=2, resource_version="2", node_selector={"matchLabels": {"pool": "b"}}, maxParallel=2)
            assert after(Watched.POLICIES, changed) == {"pool": 1, "other": 1}
        finally:
            await policies.stop()
    asyncio.run(run())


def test_a_line_is_not_decided_again_for_the_step_of_each_maintenance_in_it_while_changes_come() -> None:
    """A fleet created at once: each NodeMaintenance's creation is a change, and each one's step asks where it stands.
    One the last decision kept in line reads its wait from it while the decision the changes bring is pending (it took
    one decision of the whole line per step, a fleet of 5,000 deciding its line five thousand times). The pending decision,
    at the loop's next turn, puts the newcomers in line."""
    api = pool_api()

    async def body(policies: Policies) -> None:
        await read(policies)
        policies.decisions.decision()
        before = lines_decided("pool")
        for i, name in enumerate(POOL[1:]):
            policies.feed(Watched.MAINTENANCES, "ADDED", runtime_nm(f"nm-{name}b", name, created=f"2026-01-01T01:0{i}:00Z"))
            assert queued_reason(gate_of(policies, api, name)) == "WaitingForSlot"
        assert lines_decided("pool") == before
        await asyncio.sleep(0)
        assert lines_decided("pool") == before + 1
        decided = policies.decisions.decision().verdicts
        assert [decided[f"nm-{name}b"].kind for name in POOL[1:]] == [VerdictKind.WAITING] * 4
    scenario(api, body)


def test_a_line_is_put_in_order_once_and_kept_in_order_as_maintenances_come_and_go(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fleet's line changes one maintenance at a time: each newcomer takes its place in the line kept since the last
    decision, and the next decision reads it in order without working out every maintenance's place again."""
    api = pool_api()
    placed: list[str] = []
    order = line.order

    def counted(maintenance: Any) -> tuple[Any, ...]:
        placed.append(maintenance["metadata"]["name"])
        return order(maintenance)

    monkeypatch.setattr(line, "order", counted)

    async def body(policies: Policies) -> None:
        await read(policies)
        policies.decisions.decision()
        assert sorted(placed) == [f"nm-{name}" for name in POOL]  # the first decision puts the line in order
        placed.clear()
        for i, name in enumerate(reversed(POOL[1:])):
            policies.feed(Watched.MAINTENANCES, "ADDED", runtime_nm(f"nm-{name}b", name, created=f"2026-01-01T01:0{i}:00Z"))
        policies.feed(Watched.MAINTENANCES, "DELETED", api.objects[nm_path("nm-n5")])
        deleting = api.objects[nm_path("nm-n3")]
        policies.feed(Watched.MAINTENANCES, "MODIFIED", {**deleting, "metadata": {**deleting["metadata"], "deletionTimestamp": "2026-01-01T02:00:00Z"}})
        decided = policies.decisions.decision().verdicts
        assert sorted(placed) == [f"nm-{name}b" for name in POOL[1:]]  # each newcomer placed once, nobody else, nobody again
        assert [(name, decided[name].position) for name in sorted(decided, key=lambda n: decided[n].position or 0)
                if decided[name].kind == VerdictKind.WAITING] == [
            ("nm-n2", 1), ("nm-n4", 2), ("nm-n5b", 3), ("nm-n4b", 4), ("nm-n3b", 5), ("nm-n2b", 6)]
    scenario(api, body)


def test_a_grant_is_never_read_from_a_decision_a_change_has_made_old() -> None:
    """Only a wait is read from the last decision: once a change since may take a grant back (a node gone down under
    maxUnavailable 1), the step that would take the node reads a decision made now."""
    api = pool_api(maxUnavailable=1)

    async def body(policies: Policies) -> None:
        await read(policies)
        policies.feed(Watched.NODES, "MODIFIED", runtime_node("n1", labels={"pool": "a"}))  # nm-n1 gave n1 back, and went
        policies.feed(Watched.MAINTENANCES, "DELETED", api.objects.pop(nm_path("nm-n1")))
        assert policies.decisions.decision().verdicts["nm-n2"].kind == VerdictKind.ADMITTED
        policies.feed(Watched.NODES, "MODIFIED", runtime_node("n5", labels={"pool": "a"}, unschedulable=True))
        assert queued_reason(gate_of(policies, api, "n2")) == "WaitingForSlot"
    scenario(api, body)


def test_which_policy_governs_a_node_follows_its_labels_between_decisions() -> None:
    # Kept per node between decisions: a node relabelled out of the pool leaves the line; relabelled back, rejoins it.
    api = pool_api()

    async def body(policies: Policies) -> None:
        await read(policies)
        assert policies.decisions.decision().verdicts["nm-n3"].kind == VerdictKind.WAITING
        for labels, expected in (({"pool": "b"}, None), ({"pool": "a"}, VerdictKind.WAITING)):
            relabelled = dict(api.objects[node_path("n3")], metadata={"name": "n3", "labels": labels})
            policies.feed(Watched.NODES, "MODIFIED", relabelled)
            verdict = policies.decisions.decision().verdicts.get("nm-n3")
            assert (verdict.kind if verdict else None) == expected
    scenario(api, body)


def test_a_held_node_relabelled_out_of_its_pool_keeps_its_slot_and_its_drain_the_policy_s_rules() -> None:
    # nm-n1 took n1 under the pool's policy (the node records it); n1 is then relabelled out of the pool.
    api = pool_api()
    api.objects[node_path("n1")]["metadata"]["annotations"][nodes.POLICY] = "pool"

    async def body(policies: Policies) -> None:
        await read(policies)
        relabelled = dict(api.objects[node_path("n1")], metadata={**api.objects[node_path("n1")]["metadata"], "labels": {"pool": "b"}})
        api.objects[node_path("n1")] = relabelled
        policies.feed(Watched.NODES, "MODIFIED", relabelled)
        decision = policies.decisions.decision()
        assert decision.verdicts["nm-n2"].kind == VerdictKind.WAITING  # maxParallel 1 still holds
        assert decision.summaries["pool"].in_maintenance == 1
        held = gate_of(policies, api, "n1")
        assert held.terms.rules is not None and [r.behavior for r in held.terms.rules] == [Behavior.SKIP]
    scenario(api, body)


def test_a_slot_freed_wakes_the_next_in_line_not_every_maintenance_whose_place_moved() -> None:
    """A thousand in line are not all woken each time one is admitted: only those whose standing changed."""
    api, told = pool_api(), list[Collection[str] | None]()

    async def run() -> None:
        policies = Policies(api, "operator-ns", told.append)
        try:
            await read(policies)
            assert policies.decisions.decision().verdicts["nm-n3"].position == 2
            told.clear()
            policies.feed(Watched.MAINTENANCES, "DELETED", api.objects[nm_path("nm-n1")])  # deleted, its node given back:
            freed = dict(api.objects[node_path("n1")], metadata={"name": "n1", "labels": {"pool": "a"}})
            policies.feed(Watched.NODES, "MODIFIED", freed)
            await asyncio.sleep(0)  # told once the loop turns: every change seen meanwhile is decided once
            assert told == [["nm-n1", "nm-n2"]]  # the one gone, and the next in line, now admitted; not the three that moved up
            assert policies.decisions.decision().verdicts["nm-n3"].position == 1  # moved up: it sees that when it looks again
            pool = api.objects[policy_path("pool")]
            told.clear()
            policies.feed(Watched.POLICIES, "MODIFIED", {**pool, "status": {"inMaintenance": 0}})  # the policies' own status write
            await asyncio.sleep(0)
            assert told == []  # decides nothing: nobody is woken
            policies.feed(Watched.POLICIES, "MODIFIED", {**pool, "metadata": {**pool["metadata"], "generation": 2},
                                                         "spec": {**pool["spec"], "maxParallel": 2}})
            await asyncio.sleep(0)
            # Its spec changed: the one admitted reads it again, and the next in line now fits; those still in line are not woken.
            assert told == [["nm-n2", "nm-n3"]]
        finally:
            await policies.stop()
    asyncio.run(run())


def test_a_node_given_back_is_decided_at_the_next_turn_while_other_changes_wait_for_the_pace(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fleet's line is decided at a pace, its changes gathered meanwhile, so deciding takes a bounded share of the time.
    A hand-back is not held to it: the slot it frees goes to the next in line at the loop's next turn, with every change
    gathered until then, instead of standing empty for the pace."""
    api, told = pool_api(), list[Collection[str] | None]()
    monkeypatch.setattr(decisions, "DECISION_SECONDS_PER_VERDICT", 10.0)  # the pace of a line far longer than five

    async def run() -> None:
        policies = Policies(api, "operator-ns", told.append)
        try:
            await read(policies)
            policies.decisions.decision()
            told.clear()
            policies.feed(Watched.NODES, "MODIFIED", runtime_node("n3", labels={"pool": "a", "zone": "z"}))
            await asyncio.sleep(0.01)
            assert told == []  # waits for the pace
            policies.feed(Watched.MAINTENANCES, "DELETED", api.objects[nm_path("nm-n1")])  # deleted, its node given back:
            policies.feed(Watched.NODES, "MODIFIED", dict(api.objects[node_path("n1")], metadata={"name": "n1", "labels": {"pool": "a"}}))
            await asyncio.sleep(0)
            assert told == [["nm-n1", "nm-n2", "nm-n3"]]  # at once, with the change that waited
            assert policies.decisions.decision().verdicts["nm-n2"].kind == VerdictKind.ADMITTED
        finally:
            await policies.stop()
    asyncio.run(run())


# ----------------------------------------------------------------- waitForHealthy
WEB = {"kind": "PodDisruptionBudget", "namespace": "app", "name": "web"}
BUDGET_PATH = "/apis/policy/v1/namespaces/app/poddisruptionbudgets/web"


def recovering_api(healthy: int) -> FakeApi:
    """The pool under waitForHealthy after a restart: n1 was given back a moment ago (the policy's status says so) and
    the budget of the pod evicted from it has ``healthy`` of its 1 pod healthy."""
    api = pool_api(waitForHealthy=True)
    del api.objects[nm_path("nm-n1")]
    api.objects[node_path("n1")]["metadata"]["annotations"] = {}
    since = timestamps.rfc3339(timestamps.now())
    api.objects[policy_path("pool")]["status"] = {"recovering": [{"node": "n1", "since": since, "waitingFor": [], "workloads": [WEB]}]}
    api.objects[BUDGET_PATH] = budget("web", namespace="app", generation=1, observed=1, healthy=healthy, expected=1)
    return api


async def health_read(policies: Policies) -> None:
    await read(policies)
    policies.decisions.decision()  # a policy waits for health: its workloads' watches start
    assert policies.recovery is not None
    await asyncio.gather(*(m.synced.wait() for m in policies.recovery.mirrors.values()))


def written_status(api: FakeApi) -> dict[str, Any]:
    return api.calls_to("PATCH", policy_path("pool", "status"))[-1].body["status"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(("healthy", "verdict", "waiting_for"), [(0, "WaitingForSlot", ["PodDisruptionBudget app/web: 0 of 1 healthy"]),
                                                                 (1, "SlotGranted", None)])
def test_a_node_given_back_keeps_its_slot_until_its_evicted_workloads_are_healthy_across_a_restart(
        healthy: int, verdict: str, waiting_for: list[str] | None) -> None:
    api = recovering_api(healthy)

    async def body(policies: Policies) -> None:
        await health_read(policies)
        # Healthy or not, n1 keeps its slot while the status lists it: a take before a status that drops it would
        # count twice to whoever reads that status.
        assert queued_reason(gate_of(policies, api, "n2")) == "WaitingForSlot"
        await write_statuses(policies)
        await asyncio.sleep(0)  # the write's change decided, as the operator does at the loop's next turn
        gate = gate_of(policies, api, "n2")
        assert (queued_reason(gate) if gate.terms.waiting else next(c.reason for c in gate.terms.conditions if c.type == "Queued")) == verdict
        status = written_status(api)
        assert [e.get("waitingFor") for e in status["recovering"]] == ([waiting_for] if waiting_for else [])
        condition = next(c for c in status["conditions"] if c["type"] == "Recovering")
        assert condition["status"] == ("True" if waiting_for else "False")
    scenario(api, body)


def test_a_budget_that_cannot_be_read_keeps_the_slot_and_says_why() -> None:
    api = recovering_api(healthy=1)
    api.fail("GET", "/apis/policy/v1/poddisruptionbudgets", ServerError(503, "ServiceUnavailable", "etcd is away"), times=1000)

    async def body(policies: Policies) -> None:
        await read(policies)
        assert queued_reason(gate_of(policies, api, "n2")) == "WaitingForSlot"
        await write_statuses(policies)
        assert written_status(api)["recovering"][0]["waitingFor"] == [
            "PodDisruptionBudget app/web: unknown, the PodDisruptionBudgets have not been listed yet"]
    scenario(api, body)


def test_the_node_is_given_back_once_its_policy_records_it_as_recovering() -> None:
    """Tried again while the write still fails, the hand-back waits again: the entry the first try made is in memory
    only, and a restart would lose it with the slot."""
    api = pool_api(waitForHealthy=True)
    api.objects[nm_path("nm-n1")]["status"] = {"evictedWorkloads": [WEB]}
    api.objects[BUDGET_PATH] = budget("web", namespace="app", generation=1, observed=1, healthy=0, expected=1)

    async def body(policies: Policies) -> None:
        await health_read(policies)
        api.outage = Unreachable("connection refused")
        for _ in range(2):
            with pytest.raises(giving_back.Later, match="records it as recovering: connection refused"):
                await giving_back.before(policies, api.objects[nm_path("nm-n1")], handing_back(api))
        api.outage = None
        await giving_back.before(policies, api.objects[nm_path("nm-n1")], handing_back(api))
        [entry] = written_status(api)["recovering"]
        assert (entry["node"], entry["workloads"], entry["waitingFor"]) == ("n1", [WEB], [health.NOT_GIVEN_BACK, "PodDisruptionBudget app/web: 0 of 1 healthy"])
    scenario(api, body)


DB = {"kind": "PodDisruptionBudget", "namespace": "app", "name": "db"}


@pytest.mark.parametrize("taken_again", [True, False], ids=["by-a-new-maintenance", "the-same-maintenance-deleted-after-its-timeout"])
def test_a_node_maintained_again_while_recovering_waits_for_both_drains_workloads_from_its_new_hand_back(taken_again: bool) -> None:
    """n1 was given back by an earlier maintenance (its entry waits for db) and is taken again before db is healthy: the
    new hand-back keeps the slot for what either drain evicted, counted from the new hand-back. A deletion after the same
    maintenance's own timeout hand-back adds nothing and restarts no wait."""
    api = pool_api(waitForHealthy=True)
    earlier = timestamps.now() - datetime.timedelta(minutes=5)
    api.objects[policy_path("pool")]["status"] = {"recovering": [
        {"node": "n1", "since": timestamps.rfc3339(earlier), "waitingFor": [], "workloads": [DB]}]}
    taken = earlier + datetime.timedelta(minutes=1 if taken_again else -1)
    api.objects[nm_path("nm-n1")]["status"] = {"evictedWorkloads": [WEB], "drainStartTime": timestamps.rfc3339(taken)}
    api.objects[BUDGET_PATH] = budget("web", namespace="app", generation=1, observed=1, healthy=0, expected=1)
    api.objects[BUDGET_PATH.replace("web", "db")] = budget("db", namespace="app", generation=1, observed=1, healthy=0, expected=1)

    async def body(policies: Policies) -> None:
        await health_read(policies)
        await giving_back.before(policies, api.objects[nm_path("nm-n1")], handing_back(api))
        await write_statuses(policies)
        [entry] = written_status(api)["recovering"]
        if taken_again:
            assert sorted(w["name"] for w in entry["workloads"]) == ["db", "web"]
            assert timestamps.parse(entry["since"]) > taken
        else:
            assert (entry["workloads"], entry["since"]) == ([DB], timestamps.rfc3339(earlier))
    scenario(api, body)


def test_a_pod_of_a_workload_not_recorded_yet_leaves_only_once_the_status_records_it() -> None:
    # A pod bound to the node right after a status write, of a workload the drain has not evicted from yet: its
    # eviction waits for no interval between writes, and goes out only once status.evictedWorkloads names its
    # workload, so that a failed write or a restart never leaves a workload the policy does not wait for.
    api = pool_api(waitForHealthy=True)
    held = {**api.objects[node_path("n1")], "spec": {"unschedulable": True, "taints": [dict(nodes.TAINT)]}}
    status_path = nm_path("nm-n1", subresource="status")

    async def body(policies: Policies) -> None:
        await read(policies)
        shared = Shared(api, BudgetWatch(api), CordonedNodes(api), Active(), "v1beta1", lambda *_: None, policies=policies)
        nm_body = api.objects[nm_path("nm-n1")]
        engine = Engine(shared, lambda: nm_body, logging.LoggerAdapter(logging.getLogger("test"), {}), exists=lambda holder: holder == "nm-n1")
        stand_in_watches(engine, held, [runtime_pod("web-0", owner_name="web")])
        await engine.step()
        assert ("POST", pod_path("app", "web-0") + "/eviction") in api.writes()
        nm_body["status"] = api.calls_to("PATCH", status_path)[-1].body["status"]  # kopf shows it now
        own_pods(engine).objects["app/db-0"] = runtime_pod("db-0", owner_name="db")
        api.calls.clear()
        await engine.step()
        writes = api.writes()
        assert ("PATCH", status_path) in writes, "the status recording db-0's workload was not written"
        assert writes.index(("PATCH", status_path)) < writes.index(("POST", pod_path("app", "db-0") + "/eviction"))
        recorded = api.calls_to("PATCH", status_path)[-1].body["status"]["evictedWorkloads"]
        assert {"kind": "ReplicaSet", "namespace": "app", "name": "db"} in recorded
    scenario(api, body)


def test_when_a_window_opens_the_policies_decide_again_and_tell_every_maintenance(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing in the cluster changes when a window opens: a timer set at the next boundary decides again."""
    api, told = pool_api(windows=[{"schedule": "0 22 * * *", "duration": "1h"}]), list[Collection[str] | None]()
    started = timestamps.now()
    opening = datetime.datetime(2026, 1, 1, 22, tzinfo=datetime.UTC)
    # The clock reads 0.2 s before the window opens when the test starts, and runs on.
    monkeypatch.setattr(timestamps, "now", lambda: opening - datetime.timedelta(seconds=0.2) + (datetime.datetime.now(datetime.UTC) - started))

    async def run() -> None:
        policies = Policies(api, "operator-ns", told.append)
        try:
            await read(policies)
            verdict = policies.decisions.decision().verdicts["nm-n2"]
            assert verdict.kind == VerdictKind.CLOSED and verdict.opens == opening
            told.clear()
            await asyncio.sleep(0.5)
            assert None in told  # every maintenance was told
            assert policies.decisions.decision().verdicts["nm-n2"].kind == VerdictKind.WAITING  # in line for the one slot, n1 holding it
            boundary = policies.decisions.boundary
            assert boundary is not None and boundary - asyncio.get_running_loop().time() > 3000  # the window's end
        finally:
            await policies.stop()
    asyncio.run(run())


def test_a_status_write_carries_the_policy_s_resource_version_and_after_a_conflict_the_fresh_one() -> None:
    """A status write of ours whose answer never came may be carried out after a newer one: carrying the policy's
    resourceVersion, it is refused then (the late machine's seed 2790005948). A conflict (an edit, or our last write
    the watch has not shown yet) reads the policy again, and the recovering node is written all the same."""
    api = recovering_api(0)
    path = policy_path("pool", "status")
    api.fail("PATCH", path, Conflict(409, "Conflict", "the object has been modified"))
    api.script("GET", policy_path("pool"), {**api.objects[policy_path("pool")], "metadata": {"name": "pool", "generation": 1, "resourceVersion": "2"}})

    async def body(policies: Policies) -> None:
        await health_read(policies)
        await write_statuses(policies)
        assert [call.body["metadata"]["resourceVersion"] for call in api.calls_to("PATCH", path)][:2] == ["1", "2"]
        assert [e["node"] for e in written_status(api)["recovering"]] == ["n1"]
    scenario(api, body)


def test_a_node_given_back_while_another_policy_s_status_is_written_stays_recovering() -> None:
    """A hand-back made while the first policy's status is on its way is written in the next round, not dropped by
    the current one as a node not judged yet."""
    api = pool_api(waitForHealthy=True)
    api.objects[policy_path("other")] = nm_policy("other", generation=1, resource_version="1", node_selector={"matchLabels": {"pool": "b"}}, waitForHealthy=True)
    api.objects[node_path("m1")] = runtime_node("m1", labels={"pool": "b"})
    api.objects[BUDGET_PATH] = budget("web", namespace="app", generation=1, observed=1, healthy=0, expected=1)
    held, release = asyncio.Event(), asyncio.Event()
    patch = api.patch

    async def holding(path: str, body: dict[str, Any], content_type: str | None = None) -> dict[str, Any]:
        if path == policy_path("pool", "status") and not release.is_set():
            held.set()
            await release.wait()
        return await patch(path, body, content_type)

    api.patch = holding  # type: ignore[method-assign]

    async def body(policies: Policies) -> None:
        await health_read(policies)
        writing = asyncio.create_task(write_statuses(policies))
        await held.wait()  # the first policy's status is on its way
        recovering = asyncio.create_task(policies.recover("other", "m1", [WEB], None))
        await asyncio.sleep(0.05)  # m1 is given back, and its write waits for the round under way
        release.set()
        await asyncio.gather(writing, recovering)
        written = api.calls_to("PATCH", policy_path("other", "status"))[-1].body["status"]
        assert [e["node"] for e in written.get("recovering") or ()] == ["m1"]
    scenario(api, body)


# nm-n1's drain, started long ago under a timeout of one second and onTimeout HandBack, has evicted what the budget
# web covers, and a pod is still to go: its next step hands n1 back.
GIVEN_BACK = runtime_node("n1", labels={"pool": "a"})
HELD = {**GIVEN_BACK, "metadata": {**GIVEN_BACK["metadata"], "annotations": {nodes.HOLDER: "nm-n1"}},
        "spec": {"unschedulable": True, "taints": [{"key": "kubevirt.io/drain", "effect": "NoSchedule"}]}}


def timing_out_api() -> FakeApi:
    """The pool under waitForHealthy (capped at 60 s), nm-n1's drain about to time out, the budget web not healthy."""
    api = pool_api(waitForHealthy=True, waitForHealthySeconds=60)
    api.objects[nm_path("nm-n1")] = runtime_nm("nm-n1", "n1", drain={"timeoutSeconds": 1, "onTimeout": "HandBack"},
                                               status={"phase": "Running", "drainStartTime": "2020-01-01T00:00:00Z", "evictedWorkloads": [WEB]})
    api.objects[BUDGET_PATH] = budget("web", namespace="app", generation=1, observed=1, healthy=0, expected=1)
    return api


def timing_out(api: FakeApi, policies: Policies) -> Engine:
    """nm-n1's drain engine, watching n1 as it holds it and the pod still to go."""
    shared = Shared(api, BudgetWatch(api), CordonedNodes(api), Active(), "v1beta1", lambda *_: None, policies=policies)
    body = api.objects[nm_path("nm-n1")]
    engine = Engine(shared, lambda: body, logging.LoggerAdapter(logging.getLogger("test"), {}), exists=lambda _: False)
    stand_in_watches(engine, HELD, [runtime_pod("web-0")])
    return engine


def test_a_node_handed_back_at_its_timeout_is_kept_until_its_policy_records_it_as_recovering() -> None:
    api = timing_out_api()

    async def body(policies: Policies) -> None:
        await health_read(policies)
        engine = timing_out(api, policies)
        api.fail("PATCH", policy_path("pool", "status"), Unreachable("connection refused"))
        await engine.step()
        assert api.calls_to("PATCH", node_path("n1")) == [], "the node is given back only once its policy records it"
        await engine.step()
        assert api.calls_to("PATCH", node_path("n1"))[-1].body["metadata"]["annotations"][nodes.HOLDER] is None
        [entry] = written_status(api)["recovering"]
        ended = api.calls_to("PATCH", nm_path("nm-n1", subresource="status"))[-1].body["status"]
        assert (entry["node"], entry["workloads"], entry["waitingFor"]) == ("n1", ended["evictedWorkloads"],
                                                                             [health.NOT_GIVEN_BACK, "PodDisruptionBudget app/web: 0 of 1 healthy"])
        assert WEB in entry["workloads"]
    scenario(api, body)


def test_a_timeout_whose_status_is_not_stored_records_no_recovering_node_and_keeps_the_node() -> None:
    # The policy counts the node as recovering only once the maintenance's own status records the timeout: else a
    # drain going on after a failed write would hold its node and a recovering entry whose wait started too early.
    api = timing_out_api()

    async def body(policies: Policies) -> None:
        await health_read(policies)
        engine = timing_out(api, policies)
        api.fail("PATCH", nm_path("nm-n1", subresource="status"), Unreachable("connection refused"))
        await engine.step()
        recorded = [e["node"] for call in api.calls_to("PATCH", policy_path("pool", "status")) for e in call.body["status"].get("recovering") or ()]
        assert recorded == [] and api.calls_to("PATCH", node_path("n1")) == []
    scenario(api, body)


@pytest.mark.parametrize("freed_by", ["healthy", "cap"])
def test_a_node_handed_back_at_its_timeout_keeps_its_slot_until_its_evicted_workloads_are_healthy(freed_by: str) -> None:
    """onTimeout HandBack gives the node back as a deletion does: under waitForHealthy its slot stays taken, across a
    restart, until the workloads evicted from it are healthy or waitForHealthySeconds have passed, and the deletion of
    the ended maintenance later changes nothing of that wait. The wait is counted on the operator's monotonic clock, so
    one restarted counts it anew (in doubt, it holds). On simulated time: the loop's clock and the wall clock move
    together, by the sleeps."""
    api = timing_out_api()

    def next_in_line(policies: Policies) -> VerdictKind:
        return policies.decisions.decision().verdicts["nm-n2"].kind

    async def run() -> None:
        policies = Policies(api, "operator-ns", lambda _names: None)
        try:
            await health_read(policies)
            await timing_out(api, policies).step()  # its drain times out: the node is given back
            assert api.calls_to("PATCH", node_path("n1"))[-1].body["metadata"]["annotations"][nodes.HOLDER] is None
            ended = {**api.objects[nm_path("nm-n1")], "status": api.calls_to("PATCH", nm_path("nm-n1", subresource="status"))[-1].body["status"]}
            policies.feed(Watched.NODES, "MODIFIED", GIVEN_BACK)
            policies.feed(Watched.MAINTENANCES, "MODIFIED", ended)
            assert next_in_line(policies) == VerdictKind.WAITING
            await asyncio.sleep(40)
            assert next_in_line(policies) == VerdictKind.WAITING
        finally:
            await policies.stop()
        # The operator restarts, 40 s into the wait: the cluster holds what it wrote.
        api.objects.update({node_path("n1"): GIVEN_BACK, nm_path("nm-n1"): ended})
        api.objects[policy_path("pool")]["status"] = written_status(api)
        [entry] = written_status(api)["recovering"]
        policies = Policies(api, "operator-ns", lambda _names: None)
        try:
            await health_read(policies)
            assert next_in_line(policies) == VerdictKind.WAITING
            await asyncio.sleep(30)  # deleted later: 70 s after the hand-back by the wall clock, 30 s as the restarted operator counts
            deleted = {**ended, "metadata": {**ended["metadata"], "deletionTimestamp": timestamps.rfc3339(timestamps.now())}}
            await giving_back.before(policies, deleted, handing_back(api))
            await write_statuses(policies)
            [kept] = written_status(api)["recovering"]
            assert [kept[k] for k in ("node", "since", "workloads")] == [entry[k] for k in ("node", "since", "workloads")], \
                "the deletion adds no entry and keeps the wait's start"
            assert next_in_line(policies) == VerdictKind.WAITING
            if freed_by == "healthy":
                assert policies.recovery is not None
                healthy = budget("web", namespace="app", generation=1, observed=1, healthy=1, expected=1)
                policies.recovery.mirrors["PodDisruptionBudget"].take({"type": "MODIFIED", "object": healthy})
                assert next_in_line(policies) == VerdictKind.WAITING, "kept while the status lists it"
            else:
                await asyncio.sleep(29)
                assert next_in_line(policies) == VerdictKind.WAITING, "59 s since the restart"
                await asyncio.sleep(2)  # the cap passes: the policies' timer decides again, and their status is written
            await write_statuses(policies)
            assert written_status(api)["recovering"] == []
            assert next_in_line(policies) == VerdictKind.ADMITTED
        finally:
            await policies.stop()
    with SimulatedTime() as time:
        time.run(asyncio.wait_for(run(), 600))


def test_a_status_write_whose_answer_was_lost_keeps_the_node_recovering() -> None:
    """Seed 2956732434 of Rolling: the write recording n1 as recovering was applied but its answer lost. The next round
    found the watched status saying so already, wrote nothing and counted n1 as recorded, while the status this process
    believed it had written was the one before: the round after wrote that one, without n1, while n1 was still held."""
    api = pool_api(waitForHealthy=True)
    api.objects[nm_path("nm-n1")]["status"] = {"evictedWorkloads": [WEB]}
    api.objects[BUDGET_PATH] = budget("web", namespace="app", generation=1, observed=1, healthy=0, expected=1)

    async def body(policies: Policies) -> None:
        await health_read(policies)
        await write_statuses(policies)  # the status before: nothing recovering
        api.fail("PATCH", policy_path("pool", "status"), Unreachable("the answer was lost"))
        with pytest.raises(giving_back.Later, match="the answer was lost"):
            await giving_back.before(policies, api.objects[nm_path("nm-n1")], handing_back(api))
        applied = api.calls_to("PATCH", policy_path("pool", "status"))[-1].body["status"]
        policies.feed(Watched.POLICIES, "MODIFIED", {**api.objects[policy_path("pool")], "status": applied})
        await giving_back.before(policies, api.objects[nm_path("nm-n1")], handing_back(api))  # retried: n1 is handed back
        await write_statuses(policies)
        policies.feed(Watched.NODES, "MODIFIED", GIVEN_BACK)  # the hand-back seen: the status says what n1 waits for now
        await write_statuses(policies)
        assert written_status(api)["recovering"][0]["node"] == "n1"
        assert written_status(api)["recovering"][0]["waitingFor"] == ["PodDisruptionBudget app/web: 0 of 1 healthy"]
    scenario(api, body)


def test_a_node_is_held_while_a_nodemaintenance_that_exists_names_it_as_holder() -> None:
    api = pool_api()  # n1 held by nm-n1
    api.objects[node_path("n2")]["metadata"]["annotations"] = {nodes.HOLDER: "gone"}  # its finalizer removed by hand

    async def body(policies: Policies) -> None:
        await read(policies)
        assert [watches_of(policies).held(name) for name in ("n1", "n2", "n3", "absent")] == [True, False, False, False]
    scenario(api, body)


def test_a_hand_back_delayed_past_the_cap_still_waits_the_whole_cap_after_it() -> None:
    """The entry is written before the hand-back, which the API may refuse for longer than waitForHealthySeconds
    (seed 1908195234 of Rolling): counted from the entry, the wait was over when the node came back, and the next node
    was taken at once. Counted from when the node is seen given back, it waits the whole cap."""
    api = pool_api(waitForHealthy=True, waitForHealthySeconds=60)
    api.objects[BUDGET_PATH] = budget("web", namespace="app", generation=1, observed=1, healthy=0, expected=1)

    async def run() -> None:
        written = timestamps.rfc3339(timestamps.now() - datetime.timedelta(seconds=600))
        api.objects[policy_path("pool")]["status"] = {"recovering": [{"node": "n1", "since": written, "waitingFor": [], "workloads": [WEB]}]}
        policies = Policies(api, "operator-ns", lambda _names: None)
        try:
            await health_read(policies)
            await write_statuses(policies)
            assert written_status(api)["recovering"][0]["waitingFor"] == [health.NOT_GIVEN_BACK, "PodDisruptionBudget app/web: 0 of 1 healthy"]
            api.objects[node_path("n1")] = GIVEN_BACK
            policies.feed(Watched.NODES, "MODIFIED", GIVEN_BACK)
            policies.feed(Watched.MAINTENANCES, "DELETED", api.objects.pop(nm_path("nm-n1")))
            await asyncio.sleep(59)
            assert policies.decisions.decision().verdicts["nm-n2"].kind == VerdictKind.WAITING
            await asyncio.sleep(2)
            assert policies.decisions.decision().verdicts["nm-n2"].kind == VerdictKind.ADMITTED
        finally:
            await policies.stop()
    with SimulatedTime() as time:
        time.run(asyncio.wait_for(run(), 600))


# ----------------------------------------------------------------- a policy replaced
def deleted(api: FakeApi, policies: Policies) -> dict[str, Any]:
    """The pool's policy deleted (its watch's DELETED event): the first half of a replace. Returns it as it was."""
    gone = api.objects.pop(policy_path("pool"))
    policies.feed(Watched.POLICIES, "DELETED", gone)
    return gone


def created_again(api: FakeApi, policies: Policies, gone: dict[str, Any]) -> None:
    """A policy of the same name and spec created (its watch's ADDED event): a new object, a new uid and no status yet."""
    new = {"metadata": {**gone["metadata"], "uid": "second", "generation": 1}, "spec": gone["spec"]}
    api.objects[policy_path("pool")] = new
    policies.feed(Watched.POLICIES, "ADDED", new)


def steered_clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[float], None]:
    """The running loop's clock (what its timers follow) moved on by hand: a wait of half a minute without sleeping it."""
    loop = asyncio.get_running_loop()
    real, ahead = loop.time, [0.0]
    monkeypatch.setattr(loop, "time", lambda: real() + ahead[0])

    def advance(seconds: float) -> None:
        ahead[0] += seconds
    return advance


def test_a_replaced_policy_keeps_its_line_waiting_between_its_deletion_and_its_creation() -> None:
    """kubectl replace --force (or a GitOps tool's Replace) deletes the policy and creates it again a moment later:
    meanwhile nobody in its line takes a node beyond maxParallel."""
    api = pool_api()
    api.objects[policy_path("pool")]["metadata"]["uid"] = "first"

    async def body(policies: Policies) -> None:
        await read(policies)
        gone = deleted(api, policies)
        for _ in range(2):  # the decision made as soon as the deletion is seen, and on the loop's next turn
            assert policies.decisions.decision().verdicts["nm-n2"].kind == VerdictKind.WAITING
            assert queued_reason(gate_of(policies, api, "n2")) == "WaitingForSlot"
            await asyncio.sleep(0)
        created_again(api, policies, gone)
        assert queued_reason(gate_of(policies, api, "n2")) == "WaitingForSlot"
    scenario(api, body)


def test_a_drain_under_a_replaced_policy_keeps_its_rules_between_its_deletion_and_its_creation() -> None:
    """The drain under way while its policy is replaced evicts nothing its Skip rules protect: it still sees the policy."""
    api = pool_api()
    api.objects[policy_path("pool")]["metadata"]["uid"] = "first"

    async def body(policies: Policies) -> None:
        await read(policies)
        gone = deleted(api, policies)
        for _ in range(2):
            verdict = policies.seen(api.objects[nm_path("nm-n1")], api.objects[node_path("n1")], NOW).verdict
            assert verdict is not None and verdict.policy is not None and verdict.policy.name == "pool"
            assert [r.behavior for r in gate_of(policies, api, "n1").terms.rules or ()] == [Behavior.SKIP]
            await asyncio.sleep(0)
        created_again(api, policies, gone)
        assert [r.behavior for r in gate_of(policies, api, "n1").terms.rules or ()] == [Behavior.SKIP]
    scenario(api, body)


def test_a_deleted_policy_stops_pacing_its_line_once_its_grace_has_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A deliberate delete ends the policy's pacing: once DEPARTED_GRACE_SECONDS have passed on the loop's clock with
    no new policy of its name, every maintenance is told, and those that waited follow no policy."""
    api, told = pool_api(), list[Collection[str] | None]()

    async def run() -> None:
        advance = steered_clock(monkeypatch)
        policies = Policies(api, "operator-ns", told.append)
        try:
            await read(policies)
            deleted(api, policies)
            advance(DEPARTED_GRACE_SECONDS - 1)
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            assert queued_reason(gate_of(policies, api, "n2")) == "WaitingForSlot"
            told.clear()
            advance(2)
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            assert None in told  # every maintenance was told
            assert gate_of(policies, api, "n2").terms == PolicyTerms()
        finally:
            await policies.stop()
    asyncio.run(run())


@pytest.mark.parametrize("then", ["created again", "not created again"])
def test_an_operator_started_amid_a_replace_holds_while_a_node_is_held_under_the_policy_it_never_saw(
        then: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Started after the policy was deleted and before its new object came, the operator sees n1 held under a policy
    that does not exist (the node records it) and cannot tell a replace from a deletion: for DEPARTED_GRACE_SECONDS
    from its first listing the policies count as unknown, so nothing is taken and nothing removed, and the maintenances
    say why. The new object ends that at once, with its rules; else the grace does, and n1 follows no policy."""
    api, told = pool_api(), list[Collection[str] | None]()
    api.objects[node_path("n1")]["metadata"]["annotations"][nodes.POLICY] = "pool"
    gone = api.objects.pop(policy_path("pool"))

    async def run() -> None:
        advance = steered_clock(monkeypatch)
        policies = Policies(api, "operator-ns", told.append)
        try:
            await read(policies)
            assert policies.unknown().startswith("node n1 is held under NodeMaintenancePolicy pool, which does not exist")
            assert queued_reason(gate_of(policies, api, "n2")) == "WaitingForPolicies"
            held = gate_of(policies, api, "n1").terms  # keeps its node and evicts nothing: it has no rules to keep
            assert "node n1 is held under NodeMaintenancePolicy pool, which does not exist" in held.hold and held.rules is None
            told.clear()
            if then == "created again":
                created_again(api, policies, gone)
                assert [r.behavior for r in gate_of(policies, api, "n1").terms.rules or ()] == [Behavior.SKIP]
            else:
                advance(DEPARTED_GRACE_SECONDS - 1)
                await asyncio.sleep(0)
                assert policies.unknown() != "" and None not in told
                advance(2)
                await asyncio.sleep(0)
                await asyncio.sleep(0)
                assert gate_of(policies, api, "n1").terms == PolicyTerms()
            assert policies.unknown() == "" and None in told  # every maintenance was told
        finally:
            await policies.stop()
    asyncio.run(run())


@pytest.mark.parametrize("since_the_restart", ["written", "not written"])
def test_the_recovering_nodes_of_a_replaced_policy_keep_their_slots_and_pass_to_its_new_object(since_the_restart: str) -> None:
    """Under waitForHealthy the nodes given back keep their slots while their workloads recover, recorded in the
    policy's status. A replace keeps them counted meanwhile (also when the operator, restarted, has not written that
    status yet and knows them from the object deleted alone), writes nothing to the object gone, and the new object's
    status records them, so that an operator restarted later counts them too."""
    api = recovering_api(healthy=0)
    api.objects[policy_path("pool")]["metadata"]["uid"] = "first"
    refused = [since_the_restart == "not written"]
    patch = api.patch

    async def refusing(path: str, body: dict[str, Any], content_type: str | None = None) -> dict[str, Any]:
        if path == policy_path("pool", "status") and refused[0]:
            raise Unreachable("connection refused")
        return await patch(path, body, content_type)

    def next_in_line(policies: Policies) -> VerdictKind:
        return policies.decisions.decision().verdicts["nm-n2"].kind

    async def written_by_an_operator(policies: Policies) -> None:
        await health_read(policies)
        await write_statuses(policies)

    scenario(api, written_by_an_operator)
    api.objects[policy_path("pool")]["status"] = written_status(api)  # the operator restarts: the status holds n1
    api.patch = refusing  # type: ignore[method-assign]

    async def body(policies: Policies) -> None:
        await health_read(policies)
        assert next_in_line(policies) == VerdictKind.WAITING
        gone = deleted(api, policies)
        writes = len(api.calls_to("PATCH", policy_path("pool", "status")))
        assert next_in_line(policies) == VerdictKind.WAITING
        refused[0] = False
        await write_statuses(policies)
        assert len(api.calls_to("PATCH", policy_path("pool", "status"))) == writes, "nothing is written to a policy deleted"
        created_again(api, policies, gone)
        assert next_in_line(policies) == VerdictKind.WAITING
        await write_statuses(policies)
        written = api.calls_to("PATCH", policy_path("pool", "status"))[writes:]  # to the new object
        assert written and [e["node"] for e in written[-1].body["status"]["recovering"]] == ["n1"]
        assert queued_reason(gate_of(policies, api, "n2")) == "WaitingForSlot"
    scenario(api, body)
    api.objects[policy_path("pool")]["status"] = written_status(api)  # restarted again: the new object's status holds n1

    async def after_a_restart(policies: Policies) -> None:
        await health_read(policies)
        assert next_in_line(policies) == VerdictKind.WAITING
    scenario(api, after_a_restart)


def test_a_maintenance_waiting_in_line_holds_no_engine_and_no_task_until_its_slot_is_granted() -> None:
    """A fleet's thousands in line cost their rows only: each one's engine ends once its step has found it waiting
    (its status written), and the policies' grant starts a new one."""
    api = pool_api()  # nm-n1 holds n1 under maxParallel 1; nm-n2 to nm-n5 wait in line
    in_line = {f"nm-{name}" for name in POOL[1:]}

    async def run() -> None:
        told: list[Maintenances] = []

        def tell(names: Collection[str] | None) -> None:
            for maintenances in told:
                maintenances.tell(names)

        policies = Policies(api, "operator-ns", tell)
        maintenances = Maintenances(Shared(api, BudgetWatch(api), CordonedNodes(api), Active(), "v1beta1", lambda *_: None, policies=policies))
        told.append(maintenances)
        for name in POOL:
            maintenances.seen({**api.objects[nm_path(f"nm-{name}")], "metadata": {**api.objects[nm_path(f"nm-{name}")]["metadata"], "finalizers": [FINALIZER]}})
        tasks = [asyncio.create_task(policies.run()), asyncio.create_task(maintenances.run())]
        try:
            async with asyncio.timeout(10):
                while {c.path for c in api.calls_to("PATCH") if c.path.endswith("/status")} < {nm_path(n, subresource="status") for n in in_line} or set(maintenances.running) != {"nm-n1"}:  # noqa: ASYNC110 - a park signals nobody; it is only read
                    await asyncio.sleep(0.01)
            assert not [t.get_name() for t in asyncio.all_tasks() if any(t.get_name().endswith(n) for n in in_line)]
            # n1 is given back and its maintenance is gone: the first in line is granted the slot, and only then has an engine.
            watches = watches_of(policies)
            watches.feed(Watched.MAINTENANCES, "DELETED", api.objects[nm_path("nm-n1")])
            watches.feed(Watched.NODES, "MODIFIED", runtime_node("n1", labels={"pool": "a"}, resource_version="2"))
            async with asyncio.timeout(10):
                while "nm-n2" not in maintenances.running:  # noqa: ASYNC110 - nor does an engine's start
                    await asyncio.sleep(0.01)
            assert not (in_line - {"nm-n2"}) & set(maintenances.running)  # the rest of the line still has none
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await maintenances.stop()

    asyncio.run(run())
