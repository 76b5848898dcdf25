"""The promises over a history: for each, steps where it holds find nothing, and steps that break it find a sentence
naming the node, pod or policy and the limit broken."""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import pytest

from node_maintenance.api import timestamps
from node_maintenance.drain.nodes import TAINT
from simulation.history import Action, ActionKind, State, step
from simulation.invariants import violations
from simulation.settling import at_rest, settled
from tests.unit import builders

T0 = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
POOL = {"role": "w"}


def ago(seconds: int) -> str:
    return timestamps.rfc3339(T0 - datetime.timedelta(seconds=seconds))


free = partial(builders.node, labels=POOL, ready=True)
held = partial(builders.node, labels=POOL, ready=True, unschedulable=True, taints=[dict(TAINT)], was_unschedulable=False, policy="p")
nm = partial(builders.nm, created=ago(100), finalizers=["nodemaintenance.kubevirt.io/finalizer"])
pod = partial(builders.pod, node="n1", uid="{name}")


def pool(status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    """Policy p over the pool's nodes, with ``spec`` and ``status``."""
    return {**builders.nm_policy("p", node_selector={"matchLabels": POOL}, **spec), **({"status": status} if status else {})}


def taking(nodes: list[dict[str, Any]], node_name: str, holder: str, *, policy: dict[str, Any] | None = None,
           maintenances: Sequence[dict[str, Any]] = (), **objects: Any) -> list[str]:
    """The violations of one step in which ``holder`` takes ``node_name`` from a cluster of ``nodes``."""
    policy = policy if policy is not None else pool()
    before = State.of(T0, nodes=nodes, policies=[policy], maintenances=[nm(holder, node_name), *maintenances], **objects)
    node = before.nodes[node_name]
    taken = held(node_name, holder=holder, labels=node["metadata"].get("labels"), ready=node["status"]["conditions"][0]["status"] == "True")
    return violations([step(before, before.put(nodes=[taken]), builders.take_patch(dict(node), holder, "p"))])


class TestLimits:
    @pytest.mark.parametrize(("spec", "others", "broken"), [
        ({"maxParallel": 2}, [held("n1", holder="m1")], ""),
        ({"maxParallel": 1}, [held("n1", holder="m1")], "NodeMaintenancePolicy p: 2 nodes in maintenance (n1, n2), maxParallel allows 1 of its 3 nodes"),
        ({"maxParallel": "50%"}, [held("n1", holder="m1")], "maxParallel allows 1 of its 3 nodes"),  # 1.5 rounds down
        ({"maxParallel": 1}, [held("n1", holder="gone")], ""),  # a record of a deleted maintenance holds no slot
        ({"maxParallel": 1, "status": {"recovering": [{"node": "n1", "since": ago(5), "workloads": []}]}}, [free("n1")],
         "2 nodes in maintenance (n1, n2), maxParallel allows 1"),  # a recovering node keeps its slot
        ({"maxUnavailable": 1}, [free("n1", ready=False)], "2 nodes unavailable (n1, n2), maxUnavailable allows 1 of its 3 nodes"),
        ({"maxUnavailable": 1}, [free("n1", unschedulable=True)], "2 nodes unavailable (n1, n2)"),
    ])
    def test_a_take_keeps_the_pool_within_its_limits(self, spec: dict[str, Any], others: list[dict[str, Any]], broken: str) -> None:
        found = taking([*others, free("n2"), free("n3")], "n2", "m2", policy=pool(**spec), maintenances=[nm("m1", "n1")])
        assert [broken in f and "node n2 taken by NodeMaintenance m2" in f for f in found] == ([True] if broken else [])

    def test_a_policy_deleted_moments_ago_paces_by_the_spec_it_was_deleted_with(self) -> None:
        """maxParallel raised to 2 and the policy deleted, both between two steps: the operator's watch brought both."""
        maintenances = [nm("m1", "n1"), nm("m2", "n2")]
        paced = State.of(T0, nodes=[held("n1", holder="m1"), free("n2")], policies=[pool(maxParallel=1)], maintenances=maintenances)
        for deleted_with, broken in ((2, False), (1, True)):
            gone = paced.drop("policies", "p").put(departed=[pool(maxParallel=deleted_with)])
            take = step(gone, gone.put(nodes=[held("n2", holder="m2")]), builders.take_patch(free("n2"), "m2", "p"))
            assert bool(violations([step(paced, paced), step(paced, gone), take])) is broken

    def test_a_policy_created_and_deleted_between_two_states_still_paces_for_its_grace(self) -> None:
        """Created after the operator started and deleted before the next state was taken: its watch brought both."""
        maintenances = [nm("m1", "n1"), nm("m2", "n2")]
        nodes = [held("n1", holder="m1", policy=None), free("n2")]
        start = State.of(T0, 1, nodes=nodes, maintenances=maintenances)
        brief = {**pool(maxParallel=1), "metadata": {"name": "p", "uid": "brief", "resourceVersion": "3"}}
        gone = State.of(T0, 4, nodes=nodes, maintenances=maintenances, departed=[brief])
        take = step(gone, gone.put(nodes=[held("n2", holder="m2", policy=None)]), builders.take_patch(free("n2"), "m2"))
        found = violations([step(start, start, started=True), step(start, gone), take])
        assert any("2 nodes in maintenance (n1, n2), maxParallel allows 1" in f for f in found)

    def test_a_policy_deleted_before_the_restarted_operator_could_list_it_paces_nothing(self) -> None:
        """Started, and the policy deleted before the operator's first step, with no node held under it: nothing told the
        operator of it (docs/policy.md, "Deleting or replacing a policy")."""
        maintenances = [nm("m1", "n1"), nm("m2", "n2")]
        paced = State.of(T0, nodes=[free("n1"), free("n2")], policies=[pool(maxParallel=1)], maintenances=maintenances)
        gone = paced.drop("policies", "p")
        both = gone.put(nodes=[held("n1", holder="m1", policy=None), held("n2", holder="m2", policy=None)])
        takes = [builders.take_patch(free("n1"), "m1"), builders.take_patch(free("n2"), "m2")]
        assert violations([step(paced, paced), step(gone, both, *takes, started=True)]) == []
        assert violations([step(paced, paced, started=True), step(gone, both, *takes)]) != []  # it had a step to list it

    @pytest.mark.parametrize(("deleted_after_first_step", "broken"), [(False, False), (True, True)])
    def test_a_policy_gone_before_the_restarted_operator_s_first_step_paces_nothing(self, deleted_after_first_step: bool,
                                                                                    broken: bool) -> None:
        """Created (by a replace) just before or just after the restart, so that no state before shows it, and deleted (by
        the next) before the restarted operator's first step began, no node held under it: the operator, which lists
        nothing before its first step, never saw it (seeds 3707132782 and 601270407). Still there when that step ended,
        it was listed, and it paces for its grace."""
        maintenances = [nm("m1", "n1"), nm("m2", "n2")]
        nodes = [held("n1", holder="m1", policy=None), free("n2")]
        before = State.of(T0, 1, nodes=nodes, maintenances=maintenances)
        brief = {**pool(maxParallel=1), "metadata": {"name": "p", "uid": "brief", "resourceVersion": "3"}}
        gone = State.of(T0, 4, nodes=nodes, maintenances=maintenances, departed=[brief])
        if deleted_after_first_step:
            there = State.of(T0, 3, nodes=nodes, maintenances=maintenances, policies=[brief])
            steps = [step(there, there, started=True), step(there, gone)]
        else:
            steps = [step(gone, gone, started=True)]
        take = step(gone, gone.put(nodes=[held("n2", holder="m2", policy=None)]), builders.take_patch(free("n2"), "m2"))
        found = violations([step(before, before), *steps, take])
        assert any("2 nodes in maintenance (n1, n2), maxParallel allows 1" in f for f in found) is broken

    @pytest.mark.parametrize(("listed", "broken"), [(4, False), (2, True), (6, True)])
    def test_a_policy_gone_before_the_restarted_operator_s_first_listing_paces_nothing(self, listed: int, broken: bool) -> None:
        """Seed 638710011 of Windowed: the restarted operator's first listings failed, and the policy, created by a replace
        after the restart, was deleted by the next before the listing that was answered (``Step.listed``), no node held
        under it: nothing told the operator of it (docs/policy.md, "Deleting or replacing a policy"). Listed before it
        went, it paces for its grace; and a take written (at 5) before the policies were listed is excused by nothing."""
        maintenances = [nm("m1", "n1"), nm("m2", "n2")]
        nodes = [held("n1", holder="m1", policy=None), free("n2")]
        start = State.of(T0, 1, nodes=nodes, maintenances=maintenances)
        brief = {**pool(maxParallel=1), "metadata": {"name": "p", "uid": "brief", "resourceVersion": "3"}}
        gone = State.of(T0, 4, nodes=nodes, maintenances=maintenances, departed=[brief])
        take = step(gone, gone.put(nodes=[held("n2", holder="m2", policy=None)]), replace(builders.take_patch(free("n2"), "m2"), revision=5))
        found = violations([step(start, start, started=True), step(start, gone), replace(take, listed=listed)])
        assert any("2 nodes in maintenance (n1, n2), maxParallel allows 1" in f for f in found) is broken

    def test_a_held_node_relabelled_out_of_the_pool_still_counts_against_the_policy_it_was_taken_under(self) -> None:
        moved = held("n1", holder="m1", labels={"role": "other"})
        found = taking([moved, free("n2"), free("n3")], "n2", "m2", policy=pool(maxParallel=1), maintenances=[nm("m1", "n1")])
        assert ["2 nodes in maintenance (n1, n2), maxParallel allows 1 of its 3 nodes" in f for f in found] == [True]

    @pytest.mark.parametrize(("steps_ago", "replaced", "restarted", "broken"), [
        (5, False, False, True), (40, False, False, False), (5, True, False, False), (5, False, True, True)])
    def test_a_policy_deleted_moments_ago_still_paces_its_pool(self, steps_ago: int, replaced: bool, restarted: bool, broken: bool) -> None:
        """Deleted as by kubectl replace --force: for 30 s (docs/policy.md) its line takes no node beyond its limits; a
        new one of its name governs at once (here with room). An operator started just before the deletion holds too:
        n1 is held under the policy, which it never saw."""
        maintenances = [nm("m1", "n1"), nm("m2", "n2")]
        paced = State.of(T0, nodes=[held("n1", holder="m1"), free("n2")], policies=[pool(maxParallel=1)], maintenances=maintenances)
        gone = paced.drop("policies", "p")
        if replaced:
            gone = gone.put(policies=[pool(maxParallel=2)])
        history = [step(paced, paced), step(paced, gone, started=restarted), *[step(gone, gone)] * steps_ago,
                   step(gone, gone.put(nodes=[held("n2", holder="m2")]), builders.take_patch(free("n2"), "m2", "p"))]
        found = violations(history)
        assert any("2 nodes in maintenance (n1, n2), maxParallel allows 1" in f for f in found) is broken

    def test_a_node_already_unavailable_adds_nothing_to_max_unavailable(self) -> None:
        nodes = [free("n1", ready=False), free("n2", ready=False), free("n3")]
        assert taking(nodes, "n2", "m2", policy=pool(maxUnavailable=1)) == []
        (found,) = taking(nodes, "n3", "m3", policy=pool(maxUnavailable=1))
        assert "3 nodes unavailable (n1, n2, n3), maxUnavailable allows 1" in found

    @pytest.mark.parametrize(("taken", "broken"), [("n2", "topology domain zone=a: 2 nodes in maintenance (n1, n2), maxParallel allows 1 of its 2 nodes"),
                                                   ("n3", "")])
    def test_a_take_keeps_each_topology_domain_within_its_limit(self, taken: str, broken: str) -> None:
        nodes = [held("n1", holder="m1", labels={**POOL, "zone": "a"}), free("n2", labels={**POOL, "zone": "a"}), free("n3", labels={**POOL, "zone": "b"})]
        found = taking(nodes, taken, "m2", policy=pool(topologyLimits=[{"topologyKey": "zone", "maxParallel": 1}]), maintenances=[nm("m1", "n1")])
        assert [broken in f for f in found] == ([True] if broken else [])

    @pytest.mark.parametrize(("known", "broken"), [(1, False), (0, True)])
    def test_a_limit_lowered_just_before_a_take_counts_from_the_step_after(self, known: int, broken: bool) -> None:
        """maxParallel lowered from ``known`` to 0 between two steps: a take in the next step may have been decided
        the instant before the edit's watch event arrived; once a step has passed, the operator knew it."""
        nodes = [free("n1"), free("n2")]
        earlier = State.of(T0, nodes=nodes, policies=[pool(maxParallel=known)], maintenances=[nm("m1", "n1")])
        before = earlier.put(policies=[pool(maxParallel=0)])
        after = before.put(nodes=[held("n1", holder="m1"), free("n2")])
        found = violations([step(earlier, earlier), step(before, after, builders.take_patch(free("n1"), "m1", "p"))])
        assert [("maxParallel allows 0" in f) for f in found] == ([True] if broken else [])

    @pytest.mark.parametrize(("told", "broken"), [
        pytest.param(17, False, id="its watch stopped before the new policy: the take knew of no policy"),
        pytest.param(21, True, id="its watch brought the new policy"),
        pytest.param(None, True, id="not known: taken as up to date"),
    ])
    def test_a_policy_the_operators_watch_never_brought_does_not_limit_a_take(self, told: int | None, broken: bool) -> None:
        """Seed 3265660538 of Closing: an operator started again listed the policies in the gap of a replace, its watch
        then went silent, and it took its node under no policy while the new one (maxParallel 0), created after the
        listing, never reached it."""
        unknown = State.of(T0, revision=16, nodes=[free("n1"), free("n2")], maintenances=[nm("m1", "n1")])
        created = replace(unknown.put(T0 + datetime.timedelta(seconds=1), policies=[pool(maxParallel=0)]), revision=20)
        taken = replace(created.put(T0 + datetime.timedelta(seconds=2), nodes=[held("n1", holder="m1", policy=None)]), revision=23)
        history = [replace(step(unknown, created), told=told), replace(step(created, created), told=told),
                   step(created, taken, replace(builders.take_patch(free("n1"), "m1"), revision=22))]
        assert [("maxParallel allows 0" in f) for f in violations(history)] == ([True] if broken else [])

    def test_an_operator_started_in_the_step_of_its_take_is_judged_by_its_own_listing(self) -> None:
        """The watch that stopped before the new policy was the process killed before the step: the one started lists
        the policies itself, and its take is judged by them."""
        unknown = State.of(T0, revision=16, nodes=[free("n1"), free("n2")], maintenances=[nm("m1", "n1")])
        created = replace(unknown.put(T0 + datetime.timedelta(seconds=1), policies=[pool(maxParallel=0)]), revision=20)
        taken = replace(created.put(T0 + datetime.timedelta(seconds=2), nodes=[held("n1", holder="m1", policy=None)]), revision=23)
        history = [replace(step(unknown, created), told=17), replace(step(created, created), told=17),
                   replace(step(created, taken, replace(builders.take_patch(free("n1"), "m1"), revision=22), started=True), listed=21)]
        assert [("maxParallel allows 0" in f) for f in violations(history)] == [True]

    def test_a_node_going_not_ready_by_itself_is_no_take(self) -> None:
        before = State.of(T0, nodes=[held("n1", holder="m1"), free("n2")], policies=[pool(maxUnavailable=1)], maintenances=[nm("m1", "n1")])
        assert violations([step(before, before.put(nodes=[free("n2", ready=False)]))]) == []


def removing(pods: list[dict[str, Any]], removed: Action, *, policy: dict[str, Any] | None = None, holder: str | None = "m1",
             status: dict[str, Any] | None = None, at: datetime.datetime = T0, **objects: Any) -> list[str]:
    """The violations of one step removing a pod from node n1, held by ``holder`` (None: by nobody)."""
    node = held("n1", holder=holder) if holder else free("n1")
    before = State.of(at, nodes=[node], pods=pods, policies=[policy or pool()], maintenances=[nm("m1", "n1", status=status or {})], **objects)
    return violations([step(before, before.put(at), removed)])


DS_POD = pod("agent", owner="DaemonSet", owner_name="agent")
EVICT = builders.removal


class TestRemovals:
    @pytest.mark.parametrize(("pods", "removed", "rules", "kept"), [
        ([pod("a")], "ns/a", [], ""),
        ([pod("m", annotations={"kubernetes.io/config.mirror": "x"})], "ns/m", [], "it is a mirror pod"),
        ([pod("a", labels={"app": "db"})], "ns/a", [{"podSelector": {"matchLabels": {"app": "db"}}, "behavior": "Skip"}],
         "NodeMaintenancePolicy p keeps it on the node (Skip)"),
        ([pod("a", labels={"app": "db"}, phase="Succeeded")], "ns/a", [{"podSelector": {"matchLabels": {"app": "db"}}, "behavior": "Skip"}], "(Skip)"),
        ([pod("a", labels={"app": "job"})], "ns/a", [{"podSelector": {"matchLabels": {"app": "job"}}, "behavior": "WaitCompleted"}],
         "NodeMaintenancePolicy p waits for it to complete by itself (WaitCompleted)"),
        ([pod("a", labels={"app": "job"}, phase="Succeeded")], "ns/a", [{"podSelector": {"matchLabels": {"app": "job"}}, "behavior": "WaitCompleted"}], ""),
        ([pod("a", annotations={"nodemaintenance.kubevirt.io/drain": "skp"})], "ns/a", [], "nodemaintenance.kubevirt.io/drain='skp' is neither skip"),
        ([pod("a"), pod("b", labels={"app": "late"})], "ns/b", [{"podSelector": {"matchLabels": {"app": "late"}}, "order": 1}],
         "its drain order 1 under NodeMaintenancePolicy p comes after order 0"),
        ([pod("a"), pod("b", labels={"app": "late"})], "ns/a", [{"podSelector": {"matchLabels": {"app": "late"}}, "order": 1}], ""),
    ])
    def test_the_drain_removes_only_what_it_may(self, pods: list[dict[str, Any]], removed: str, rules: list[dict[str, Any]], kept: str) -> None:
        found = removing(pods, EVICT(removed), policy=pool(drainRules=rules))
        assert [f"pod {removed} evicted from node n1 by NodeMaintenance m1, but" in f and kept in f for f in found] == ([True] if kept else [])

    @pytest.mark.parametrize(("earlier", "started", "broken"), [
        pytest.param("absent", False, False, id="the policy created just before the step: the drain may act before its watch event"),
        pytest.param("without the rule", False, False, id="the Skip rule added just before the step"),
        pytest.param("with the rule", False, True, id="the rule known at the end of the step before"),
        pytest.param("absent", True, True, id="the operator started just before the step: its drains wait for its first listing"),
    ])
    def test_a_rule_created_just_before_a_removal_counts_from_the_step_after(self, earlier: str, started: bool, broken: bool) -> None:
        """Seed 3094506084 of Windowed: an operator that never saw a replaced policy drained under none, and the
        replacement's creation, made between two steps, reached its watch as the step began, when its drain acted."""
        skipping = pool(drainRules=[{"podSelector": {"matchLabels": {"app": "db"}}, "behavior": "Skip"}])
        policies = {"absent": [], "without the rule": [pool()], "with the rule": [skipping]}[earlier]
        known = State.of(T0, nodes=[held("n1", holder="m1")], pods=[pod("a", labels={"app": "db"})], policies=policies,
                         maintenances=[nm("m1", "n1")])
        before = known.put(policies=[skipping])
        found = violations([step(known, known), step(before, before, EVICT("ns/a"), started=started)])
        assert [("NodeMaintenancePolicy p keeps it on the node (Skip)" in f) for f in found] == ([True] if broken else [])

    def test_a_daemonset_pod_stays_while_its_daemonset_exists(self) -> None:
        (found,) = removing([DS_POD], EVICT("ns/agent"), daemonsets=[builders.daemonset("agent")])
        assert "pod ns/agent evicted from node n1 by NodeMaintenance m1, but it is a pod of DaemonSet ns/agent" in found
        assert removing([DS_POD], EVICT("ns/agent")) == []  # its DaemonSet is gone: kubectl drain --force evicts it

    def test_the_drain_annotation_counts_only_under_a_policy(self) -> None:
        skipped = pod("a", annotations={"nodemaintenance.kubevirt.io/drain": "skip"}, labels={"other": "x"})
        assert removing([skipped], EVICT("ns/a"), policy=pool()) != []
        assert removing([skipped], EVICT("ns/a"), policy=builders.nm_policy("q", node_selector={"matchLabels": {"role": "db"}})) == []

    def test_no_pod_is_removed_from_a_node_nobody_holds(self) -> None:
        (found,) = removing([pod("a")], EVICT("ns/a"), holder=None)
        assert found == "pod ns/a evicted from node n1, which no NodeMaintenance holds"

    @pytest.mark.parametrize(("sent", "rules", "found"), [
        pytest.param(10, [], [], id="sent while m1 held the node"),
        pytest.param(0, [], ["pod ns/a evicted from node n1, which no NodeMaintenance holds"], id="carried out as it came, after the hand-back"),
        pytest.param(10, [{"podSelector": {"matchLabels": {"app": "db"}}, "behavior": "Skip"}],
                     ["pod ns/a evicted from node n1 by NodeMaintenance m1, but NodeMaintenancePolicy p keeps it on the node (Skip)"],
                     id="sent while held, though a rule kept the pod then"),
    ])
    def test_a_removal_carried_out_late_is_judged_by_what_the_operator_knew_when_it_sent_it(
            self, sent: int, rules: list[dict[str, Any]], found: list[str]) -> None:
        """Seed 1343346368 of Late: a deletion the escalation ladder ordered timed out, the NodeMaintenance was deleted
        and its node given back, and the API server carried the deletion out seconds later."""
        holding = State.of(T0, revision=10, nodes=[held("n1", holder="m1")], pods=[pod("a", labels={"app": "db"})],
                           policies=[pool(drainRules=rules)], maintenances=[nm("m1", "n1")])
        given_back = State.of(T0 + datetime.timedelta(seconds=5), revision=20, nodes=[free("n1")], pods=[pod("a", labels={"app": "db"})],
                              policies=[pool(drainRules=rules)])
        history = [step(holding, holding.put(T0 + datetime.timedelta(seconds=1))),
                   step(given_back, given_back.drop("pods", "ns/a"), EVICT("ns/a", revision=21, sent=sent))]
        assert violations(history) == found

    @pytest.mark.parametrize(("drain", "status", "grace", "broken"), [
        ({}, {"drainStartTime": ago(600)}, None, "no step of its escalation ladder had come (ladder: none"),
        ({"escalation": [{"afterSeconds": 300, "action": "DeletePods"}]}, {"drainStartTime": ago(600)}, None, ""),
        ({"escalation": [{"afterSeconds": 300, "action": "DeletePods"}]}, {"drainStartTime": ago(60)}, None,
         "no step of its escalation ladder had come (ladder: DeletePods after 300s; drainStartTime"),
        ({"escalation": [{"afterSeconds": 300, "action": "DeletePods"}]}, {"drainStartTime": ago(600)}, 0, "with grace period 0 while its ladder's step due is DeletePods"),
        ({"escalation": [{"afterSeconds": 300, "action": "ForceDeletePods"}]}, {"drainStartTime": ago(600)}, 0, ""),
        ({"escalation": [{"afterSeconds": 300, "action": "DeletePods"}]}, {"drainStartTime": ago(600), "phase": "Succeeded"}, None,
         "its drain had succeeded, which ends the escalation ladder"),
    ])
    def test_a_deletion_past_the_budgets_only_when_the_ladder_says_so(self, drain: dict[str, Any], status: dict[str, Any], grace: int | None,
                                                                      broken: str) -> None:
        found = removing([pod("a")], EVICT("ns/a", delete=True, grace=grace), policy=pool(drain=drain), status=status)
        assert [broken in f and "pod ns/a deleted from node n1 past its budgets by NodeMaintenance m1" in f for f in found] == ([True] if broken else [])

    @pytest.mark.parametrize(("set_back", "broken"), [(True, False), (False, True)])
    def test_a_deletion_retried_after_the_clock_was_set_back_is_judged_by_the_ladder_as_it_was_decided(self, set_back: bool,
                                                                                                       broken: bool) -> None:
        """The ladder's DeletePods was due at the step before (20 s into the drain); the clock then went back an hour and
        the deletion, retried, landed in the next step (seed 2188547772). Without the clock set back, it was not due."""
        status = {"drainStartTime": ago(20)}
        laddered = pool(drain={"escalation": [{"afterSeconds": 20, "action": "DeletePods"}]})
        decided = State.of(T0 if set_back else T0 - datetime.timedelta(seconds=5), nodes=[held("n1", holder="m1")], pods=[pod("a")],
                           policies=[laddered], maintenances=[nm("m1", "n1", status=status)])
        later = T0 - datetime.timedelta(seconds=3599 if set_back else 4)
        retried = decided.put(later)
        found = violations([step(decided, decided), step(retried, retried.put(later), EVICT("ns/a", delete=True))])
        assert any("no step of its escalation ladder had come" in f for f in found) is broken

    @pytest.mark.parametrize(("steps_ago", "broken"), [(5, False), (40, True)])
    def test_a_deleted_policy_s_ladder_rules_its_drains_for_its_grace(self, steps_ago: int, broken: bool) -> None:
        """A policy deleted (as by kubectl replace --force) keeps ruling its drains for 30 s (docs/policy.md)."""
        status = {"drainStartTime": ago(600)}
        laddered = pool(drain={"escalation": [{"afterSeconds": 300, "action": "DeletePods"}]})
        ruled = State.of(T0, nodes=[held("n1", holder="m1")], pods=[pod("a")], policies=[laddered], maintenances=[nm("m1", "n1", status=status)])
        gone = State.of(T0, nodes=[held("n1", holder="m1")], pods=[pod("a")], maintenances=[nm("m1", "n1", status=status)])
        history = [step(ruled, gone), *[step(gone, gone)] * steps_ago, step(gone, gone, EVICT("ns/a", delete=True))]
        found = violations(history)
        assert any("no step of its escalation ladder had come (ladder: none" in f for f in found) is broken

    def test_an_eviction_of_a_pod_not_ready_takes_nothing_from_its_budget(self) -> None:
        budget = builders.budget("web", labels={"app": "web"}, expected=2, minAvailable=2)
        web = [pod("a", labels={"app": "web"}, ready=False), pod("b", labels={"app": "web"}, node="n2")]
        before = State.of(T0, nodes=[held("n1", holder="m1")], pods=web, budgets=[budget], policies=[pool()], maintenances=[nm("m1", "n1")])
        after = before.put(pods=[pod("a", labels={"app": "web"}, ready=False, deleted_at=ago(0))])
        assert violations([step(before, after, EVICT("ns/a"))]) == []

    def test_the_policy_cap_drops_the_step(self) -> None:
        capped = pool(drain={"escalation": [{"afterSeconds": 300, "action": "DeletePods"}], "maxEscalation": "None"})
        (found,) = removing([pod("a")], EVICT("ns/a", delete=True), policy=capped, status={"drainStartTime": ago(600)})
        assert "(ladder: none" in found

    def test_a_finished_pod_is_deleted_at_any_time(self) -> None:
        assert removing([pod("a", phase="Failed")], EVICT("ns/a", delete=True), status={"drainStartTime": ago(1)}) == []

    @pytest.mark.parametrize(("window_end", "schedule", "broken"), [
        ("Pause", "0 6 * * *", True), ("Pause", "0 11 * * *", False), ("Continue", "0 6 * * *", False)])
    def test_under_window_end_pause_nothing_is_removed_while_no_window_is_open(self, window_end: str, schedule: str, broken: bool) -> None:
        policy = pool(windows=[{"schedule": schedule, "duration": "2h"}], windowEnd=window_end)  # T0 is 12:00
        found = removing([pod("a")], EVICT("ns/a"), policy=policy)
        paused = "pod ns/a evicted from node n1 by NodeMaintenance m1, but no window of NodeMaintenancePolicy p was open and its windowEnd is Pause"
        assert found == ([paused] if broken else [])
        assert removing([pod("a", phase="Succeeded")], EVICT("ns/a", delete=True), policy=policy) == []  # a finished pod may go

    @pytest.mark.parametrize(("known_end", "broken"), [("Continue", False), ("Pause", True)])
    def test_window_end_pause_set_just_before_a_removal_counts_from_the_step_after(self, known_end: str, broken: bool) -> None:
        """Seed 431003124 of Rolling: windowEnd set to Pause between two steps, while no window is open; a removal at the
        next step's start may have been decided before the edit's watch event arrived."""
        closed = [{"schedule": "0 6 * * *", "duration": "2h"}]  # T0 is 12:00
        known = State.of(T0, nodes=[held("n1", holder="m1")], pods=[pod("a")], policies=[pool(windowEnd=known_end, windows=closed)],
                         maintenances=[nm("m1", "n1")])
        before = known.put(policies=[pool(windowEnd="Pause", windows=closed)])
        found = violations([step(known, known), step(before, before, EVICT("ns/a"))])
        assert [("its windowEnd is Pause" in f) for f in found] == ([True] if broken else [])

    @pytest.mark.parametrize(("decided_at", "broken"), [(11, False), (8, True)])
    def test_under_window_end_pause_a_removal_decided_in_the_window_may_land_after_the_clock_was_set_back(self, decided_at: int,
                                                                                                         broken: bool) -> None:
        """Seed 205355035 of Rolling: the ladder's deletion, decided as the step before ended in a window (10:00 to 12:00),
        was still under way when the wall clock was set back out of it and the operator was stopped; it landed then."""
        policy = pool(windows=[{"schedule": "0 10 * * *", "duration": "2h"}], windowEnd="Pause")
        earlier = State.of(T0.replace(hour=decided_at) - datetime.timedelta(seconds=1), nodes=[held("n1", holder="m1")], pods=[pod("a")],
                           policies=[policy], maintenances=[nm("m1", "n1")])
        decided = earlier.put(T0.replace(hour=decided_at))
        set_back = decided.put(T0.replace(hour=9))  # out of the window, between two steps
        found = violations([step(earlier, decided), step(set_back, set_back, EVICT("ns/a"))])
        assert [("no window of NodeMaintenancePolicy p was open" in f) for f in found] == ([True] if broken else [])

    @pytest.mark.parametrize(("removed_by", "web_removed_at", "broken"), [
        ("drain", None, True),  # web still on the node when db went
        ("drain", 6, False),  # the drain deleted web at grace 0, then evicted db (revision 7)
        ("kubelet", 6, False),  # the kubelet finished web's deletion before the drain evicted db
        ("kubelet", 8, True),  # ... after it
    ])
    def test_a_later_order_goes_once_the_earlier_one_left_within_the_same_step(self, removed_by: str, web_removed_at: int | None,
                                                                                 broken: bool) -> None:
        """Several drain steps within one simulated second: web (order 0) leaves, then db (order 1) is evicted at
        revision 7; what counts is whether web had left by then, whoever removed it."""
        policy = pool(drainRules=[{"podSelector": {"matchLabels": {"app": "db"}}, "order": 1}])
        web, db = pod("web", labels={"app": "web"}, deleted_at=ago(10)), pod("db", labels={"app": "db"})
        before = State.of(T0, nodes=[held("n1", holder="m1")], pods=[web, db], policies=[policy], maintenances=[nm("m1", "n1", status={})])
        after = replace(before.drop("pods", "ns/db", *(["ns/web"] if web_removed_at else [])),
                        pod_removals={"ns/db": 7, **({"ns/web": web_removed_at} if web_removed_at else {})})
        removals = [EVICT("ns/web", delete=True, grace=0, revision=web_removed_at)] if removed_by == "drain" and web_removed_at else []
        found = violations([step(before, after, *removals, EVICT("ns/db", revision=7))])
        order = "pod ns/db evicted from node n1 by NodeMaintenance m1, but its drain order 1 under NodeMaintenancePolicy p comes after order 0"
        assert any(order in f for f in found) is broken

    @pytest.mark.parametrize("bound_since", [True, False])
    def test_a_pod_bound_just_before_the_step_holds_back_no_later_order_in_it(self, bound_since: bool) -> None:
        """A late pod (order 0) bound between two steps may reach the operator's watch after it evicted db (order 1)."""
        policy = pool(drainRules=[{"podSelector": {"matchLabels": {"app": "db"}}, "order": 1}])
        db, late = pod("db", labels={"app": "db"}), pod("late", labels={"app": "late"})
        earlier = State.of(T0, nodes=[held("n1", holder="m1")], pods=[db] if bound_since else [db, late], policies=[policy],
                           maintenances=[nm("m1", "n1", status={})])
        before = earlier.put(pods=[late])
        found = violations([step(earlier, earlier), step(before, before, EVICT("ns/db"))])
        assert any("its drain order 1 under NodeMaintenancePolicy p comes after order 0" in f for f in found) is not bound_since

    def test_a_pod_that_completed_within_the_step_may_go_whatever_its_rule(self) -> None:
        policy = pool(drainRules=[{"podSelector": {"matchLabels": {"app": "batch"}}, "behavior": "WaitCompleted"}])
        before = State.of(T0, nodes=[held("n1", holder="m1")], pods=[pod("b", labels={"app": "batch"})], policies=[policy], maintenances=[nm("m1", "n1")])
        done = before.put(pods=[pod("b", labels={"app": "batch"}, phase="Succeeded", deleted_at=ago(0))])
        assert violations([step(before, done, EVICT("ns/b", delete=True))]) == []
        found = violations([step(before, before, EVICT("ns/b", delete=True))])
        assert any("waits for it to complete by itself (WaitCompleted)" in f for f in found)

    def test_an_eviction_that_leaves_a_budget_short(self) -> None:
        budget = builders.budget("web", labels={"app": "web"}, expected=2, minAvailable=2)
        web = [pod("a", labels={"app": "web"}), pod("b", labels={"app": "web"}, node="n2")]
        before = State.of(T0, nodes=[held("n1", holder="m1")], pods=web, budgets=[budget], policies=[pool()], maintenances=[nm("m1", "n1")])
        after = before.put(pods=[pod("a", labels={"app": "web"}, deleted_at=ago(0))])
        assert violations([step(before, after, EVICT("ns/a"))]) == ["PodDisruptionBudget ns/web: 1 healthy pod(s), it demands 2"]
        assert violations([step(before, before, EVICT("ns/a"))]) == []

    @pytest.mark.parametrize(("min_available", "broken"), [(2, ""), (3, "PodDisruptionBudget ns/web: 2 healthy pod(s), it demands 3")])
    def test_a_deletion_past_the_budget_in_the_same_step_is_not_the_eviction_s_doing(self, min_available: int, broken: str) -> None:
        """One drain's eviction within the budget and another pod deleted past it by a ladder step that had come, in
        one simulated second: the budget is short by the deletion, which it was bypassed for."""
        web = [pod("a", labels={"app": "web"}), pod("b", labels={"app": "web"}), pod("c", labels={"app": "web"}, node="n2")]
        laddered = pool(drain={"escalation": [{"afterSeconds": 300, "action": "DeletePods"}]})
        before = State.of(T0, nodes=[held("n1", holder="m1")], pods=web, policies=[laddered],
                          budgets=[builders.budget("web", labels={"app": "web"}, expected=3, minAvailable=min_available)],
                          maintenances=[nm("m1", "n1", status={"drainStartTime": ago(600)})])
        after = before.put(pods=[pod(name, labels={"app": "web"}, deleted_at=ago(0)) for name in ("a", "b")])
        assert violations([step(before, after, EVICT("ns/a"), EVICT("ns/b", delete=True))]) == ([broken] if broken else [])

    @pytest.mark.parametrize(("counted_at", "restarted", "broken"), [
        (4, True, ""),
        (6, True, "PodDisruptionBudget ns/web: 1 healthy pod(s), it demands 2"),
        (4, False, "PodDisruptionBudget ns/web: 1 healthy pod(s), it demands 2"),
    ])
    def test_a_deletion_past_the_budget_before_a_restart_and_its_last_count_is_not_the_next_eviction_s_doing(
            self, counted_at: int, restarted: bool, broken: str) -> None:
        """Seed 2804261928 of Rolling: a ladder deleted b past the budget (revision 5) as the operator was killed; the
        restarted one's eviction of a came under the budget's count from before that deletion (revision 4), which the
        Eviction API judged by. Counted again after the deletion (revision 6), the budget would have refused it; and
        the operator that deleted b, had it not restarted, knew of it and had to hold the budget itself."""
        web = [pod("a", labels={"app": "web"}), pod("b", labels={"app": "web"}), pod("c", labels={"app": "web"}, node="n2")]
        laddered = pool(drain={"escalation": [{"afterSeconds": 300, "action": "DeletePods"}]})
        start = State.of(T0, 4, nodes=[held("n1", holder="m1")], pods=web, policies=[laddered],
                         budgets=[builders.budget("web", labels={"app": "web"}, expected=3, minAvailable=2, resource_version="4")],
                         maintenances=[nm("m1", "n1", status={"drainStartTime": ago(600)})])
        killed = replace(start.put(pods=[pod("b", labels={"app": "web"}, deleted_at=ago(0))]), revision=5)
        before = replace(killed.put(budgets=[builders.budget("web", labels={"app": "web"}, expected=3, minAvailable=2,
                                                             resource_version=str(counted_at))]), revision=max(5, counted_at))
        after = before.put(pods=[pod("a", labels={"app": "web"}, deleted_at=ago(0))])
        history = [step(start, killed, EVICT("ns/b", delete=True, revision=5)), step(before, after, EVICT("ns/a", revision=7), started=restarted)]
        assert violations(history) == ([broken] if broken else [])

    def test_an_eviction_is_judged_by_the_budget_as_it_stood_when_asked(self) -> None:
        """A workload scaled up in the same step demands more of pods not Ready yet: the budget's controller's lag."""
        web = [pod("a", labels={"app": "web"}), pod("b", labels={"app": "web"}, node="n2"), pod("c", labels={"app": "web"}, node="n2")]
        before = State.of(T0, nodes=[held("n1", holder="m1")], pods=web, budgets=[builders.budget("web", labels={"app": "web"}, expected=3, maxUnavailable=1)],
                          policies=[pool()], maintenances=[nm("m1", "n1")])
        scaled = before.put(pods=[pod("a", labels={"app": "web"}, deleted_at=ago(0))],
                            budgets=[builders.budget("web", labels={"app": "web"}, expected=4, maxUnavailable=1)])
        assert violations([step(before, scaled, EVICT("ns/a"))]) == []

    @pytest.mark.parametrize(("counted", "recounted", "found"), [
        pytest.param(4, 2, [], id="seed 2202816603 of Rolling: scaled from 4 to 2, and counted again within the step"),
        pytest.param(4, 3, ["PodDisruptionBudget ns/web: 1 healthy pod(s), it demands 2"], id="scaled from 4 to 3: still short"),
        pytest.param(4, None, ["PodDisruptionBudget ns/web: 1 healthy pod(s), it demands 3"], id="recreated: it counted nothing yet"),
        pytest.param(3, 0, [], id="seed 2253909232 of Killed: scaled to none, demanding nothing"),
        pytest.param(0, 4, [], id="seed 43333186 of Rolling: scaled from none, the eviction allowed by a budget that counted none"),
    ])
    def test_an_eviction_as_its_workload_is_scaled_within_the_step_is_judged_by_the_budget_the_api_counted(
            self, counted: int, recounted: int | None, found: list[str]) -> None:
        """The workload was scaled, and its budget counted again, in the step where the drain's eviction came: judged by
        the demand of the step's start alone, the eviction broke a budget the API had just said allowed it (a scale-down
        to 2 or to none), or was allowed by one that had counted no pods (a scale-up from none)."""
        web = [pod("a", labels={"app": "web"}), pod("b", labels={"app": "web"}, node="n2")]
        before = State.of(T0, nodes=[held("n1", holder="m1")], pods=web, policies=[pool()], maintenances=[nm("m1", "n1")],
                          budgets=[builders.budget("web", labels={"app": "web"}, expected=counted, maxUnavailable=1)])
        after = before.put(pods=[pod("a", labels={"app": "web"}, deleted_at=ago(0))],
                           budgets=[builders.budget("web", labels={"app": "web"}, expected=recounted, maxUnavailable=1)])
        assert violations([step(before, after, EVICT("ns/a"))]) == found


    @pytest.mark.parametrize(("told", "broken"), [
        pytest.param(10, False, id="by the step before's end its watch had brought nothing after revision 10: the policy never reached it"),
        pytest.param(15, True, id="its watch brought the policy"),
        pytest.param(None, True, id="not known: taken as up to date"),
    ])
    def test_a_policy_the_operators_watch_never_brought_does_not_keep_a_pod(self, told: int | None, broken: bool) -> None:
        """Seed 2113657920 of Search: an operator started again listed the policies in the gap of a replace, its watch
        then went silent, and it drained under no policy while the new one, created after the listing, never reached it."""
        skipping = pool(drainRules=[{"podSelector": {"matchLabels": {"app": "db"}}, "behavior": "Skip"}])
        unknown = State.of(T0, revision=10, nodes=[held("n1", holder="m1")], pods=[pod("a", labels={"app": "db"})], maintenances=[nm("m1", "n1")])
        created = replace(unknown.put(T0 + datetime.timedelta(seconds=1), policies=[skipping]), revision=15)
        history = [replace(step(unknown, created), told=told), step(created, created.drop("pods", "ns/a"), EVICT("ns/a", revision=21))]
        assert [("keeps it on the node (Skip)" in f) for f in violations(history)] == ([True] if broken else [])

    @pytest.mark.parametrize(("listed", "broken"), [
        pytest.param(27, False, id="listed after the deletion: the old policy was never seen, its namesake never reached it"),
        pytest.param(25, True, id="listed before the deletion: the operator saw the old policy, which keeps its rules for the grace"),
    ])
    def test_a_policy_replaced_before_the_restarted_operators_listing_is_not_seen_for_its_namesake(self, listed: int, broken: bool) -> None:
        """Seed 2113657920 of Search, the replace's first half: the old policy was deleted before the restarted
        operator's first listing, and the new one (another object of the same name) came after it while its watch was
        silent. Seen by name, the old one would rule the drain for its grace."""
        rules = [{"podSelector": {"matchLabels": {"app": "db"}}, "behavior": "Skip"}]
        old, new = (dict(pool(drainRules=rules), metadata={"name": "p", "uid": uid, "resourceVersion": version})
                    for uid, version in (("uid-old", "20"), ("uid-new", "29")))
        objects = {"nodes": [held("n1", holder="m1", policy=None)], "pods": [pod("a", labels={"app": "db"})], "maintenances": [nm("m1", "n1")]}
        started = State.of(T0, revision=24, policies=[old], **objects)
        deleted = replace(State.of(T0 + datetime.timedelta(seconds=1), revision=26, **objects),
                          departed={"p": {**old, "metadata": {**old["metadata"], "resourceVersion": "26"}}})
        created = replace(deleted.put(T0 + datetime.timedelta(seconds=2), policies=[new]), revision=30)
        history = [step(started, deleted, started=True), replace(step(deleted, created), listed=listed, told=listed),
                   step(created, created.drop("pods", "ns/a"), EVICT("ns/a", revision=31))]
        assert [("keeps it on the node (Skip)" in f) for f in violations(history)] == ([True] if broken else [])

    def test_a_removal_carried_out_late_counts_only_what_came_before_it_was_sent(self) -> None:
        """A late eviction of a later order's pod, sent while a pod of an earlier order was still on the node, broke the
        order even if that pod left before the eviction landed; an eviction sent to a node nobody held broke the promise
        even if the node was taken before it landed."""
        rules = [{"podSelector": {"matchLabels": {"app": "db"}}, "order": 1}]
        web, db = pod("web", labels={"app": "web"}), pod("db", labels={"app": "db"})
        holding = State.of(T0, revision=10, nodes=[held("n1", holder="m1")], pods=[web, db], policies=[pool(drainRules=rules)],
                           maintenances=[nm("m1", "n1")])
        left = replace(holding.put(T0 + datetime.timedelta(seconds=1)).drop("pods", "ns/web"), revision=16, pod_removals={"ns/web": 15})
        history = [step(holding, left), step(left, left.drop("pods", "ns/db"), EVICT("ns/db", revision=21, sent=12))]
        (found,) = violations(history)
        assert found == "pod ns/db evicted from node n1 by NodeMaintenance m1, but its drain order 1 under NodeMaintenancePolicy p comes after order 0, whose pods are still on the node"
        free_then = State.of(T0, revision=10, nodes=[free("n1")], pods=[web], policies=[pool()], maintenances=[nm("m1", "n1")])
        taken = replace(free_then.put(T0 + datetime.timedelta(seconds=1), nodes=[held("n1", holder="m1")]), revision=13)
        history = [step(free_then, taken, replace(builders.take_patch(dict(free_then.nodes["n1"]), "m1", "p"), revision=12)),
                   step(taken, taken.drop("pods", "ns/web"), EVICT("ns/web", revision=21, sent=11))]
        assert violations(history) == ["pod ns/web evicted from node n1, which no NodeMaintenance holds"]


class TestHandingBack:
    def giving_back(self, maintenance: dict[str, Any], action: Action | None = None) -> list[str]:
        node = held("n1", holder="m1")
        before = State.of(T0, nodes=[node], policies=[pool()], maintenances=[maintenance])
        after = before.put(nodes=[free("n1")])
        return violations([step(State.of(T0, nodes=[free("n1")]), before), step(before, after, action or builders.give_back_patch(node, "m1"))])

    def test_a_deleted_maintenance_gives_its_node_back(self) -> None:
        assert self.giving_back(nm("m1", "n1", deleted_at=ago(1))) == []

    def test_a_timeout_gives_the_node_back(self) -> None:
        ended = {"conditions": [{"type": "TimedOut", "status": "True", "reason": "HandedBack"}]}
        assert self.giving_back(nm("m1", "n1", status=ended)) == []

    def test_no_hand_back_while_the_maintenance_stands(self) -> None:
        (found,) = self.giving_back(nm("m1", "n1"))
        assert found == "node n1: given back while NodeMaintenance m1 is neither deleted nor ended by its timeout"

    def test_no_uncordon_that_keeps_the_holder(self) -> None:
        uncordon = Action(kind=ActionKind.NODE_PATCH, key="n1", body={"spec": {"unschedulable": None}}, maintenance="m1")
        found = self.giving_back(nm("m1", "n1", deleted_at=ago(1)), uncordon)
        assert "node n1: uncordoned while NodeMaintenance m1 still holds it (the patch keeps its record)" in found

    def test_a_node_given_back_is_as_it_was(self) -> None:
        node = held("n1", holder="m1")
        before = State.of(T0, nodes=[node], policies=[pool()], maintenances=[nm("m1", "n1", deleted_at=ago(1))])
        left_tainted = before.put(nodes=[free("n1", taints=[dict(TAINT)])])
        (found,) = violations([step(State.of(T0, nodes=[free("n1")]), before), step(before, left_tainted, builders.give_back_patch(node, "m1"))])
        assert found == "node n1: carries the drain taint while no NodeMaintenance holds it"

    def test_a_maintenance_its_timeout_ended_never_takes_its_node_again(self) -> None:
        ended = {"conditions": [{"type": "TimedOut", "status": "True", "reason": "HandedBack"}]}
        found = taking([free("n1")], "n1", "m1", maintenances=[nm("m1", "n1", status=ended)])
        assert found == ["node n1: taken again by NodeMaintenance m1, which its timeout ended (onTimeout HandBack gave the node back for good)"]
        assert taking([free("n1")], "n1", "m1") == []

    @pytest.mark.parametrize(("deleted", "broken"), [(False, True), (True, False)])
    def test_a_maintenance_that_gave_its_node_back_never_takes_it_again_whatever_its_status_says(self, deleted: bool, broken: bool) -> None:
        """The timeout's hand-back done, the status that records it lost: the hand-back itself says the node went for good.
        A deleted maintenance gives its node back too, and one of the same name created again is another."""
        m1 = nm("m1", "n1", uid="first", status={"phase": "Running"}, deleted_at=ago(1) if deleted else None)
        holding = State.of(T0, nodes=[held("n1", holder="m1")], policies=[pool()], maintenances=[m1])
        back = holding.put(nodes=[free("n1")], maintenances=[nm("m1", "n1", uid="first" if not deleted else "second", status={"phase": "Running"})])
        again = back.put(nodes=[held("n1", holder="m1")])
        found = violations([step(holding, back, builders.give_back_patch(held("n1", holder="m1"), "m1")),
                            step(back, again, builders.take_patch(free("n1"), "m1", "p"))])
        taken_again = "node n1: taken again by NodeMaintenance m1, which gave it back before while not deleted (only its timeout does that, for good)"
        assert (taken_again in found) is broken

    @pytest.mark.parametrize("ended", [
        {"phase": "Failed", "lastError": "drain timed out after 45s"},
        {"phase": "Failed", "conditions": [{"type": "TimedOut", "status": "True", "reason": "HandedBack"}]}], ids=["Fail", "HandBack"])
    def test_a_drain_that_succeeded_is_ended_by_no_timeout(self, ended: dict[str, Any]) -> None:
        node = held("n1", holder="m1")
        for drained in ({"phase": "Succeeded"}, {"phase": "Running", "conditions": [{"type": "Drained", "status": "False", "reason": "LatePods"}]}):
            before = State.of(T0, nodes=[node], policies=[pool()], maintenances=[nm("m1", "n1", status=drained)])
            (found,) = violations([step(before, before.put(maintenances=[nm("m1", "n1", status=ended)]))])
            assert found.startswith("NodeMaintenance m1: its drain had succeeded, yet it turned Failed")
        running = State.of(T0, nodes=[node], policies=[pool()], maintenances=[nm("m1", "n1", status={"phase": "Running"})])
        assert violations([step(running, running.put(maintenances=[nm("m1", "n1", status=ended)]))]) == []

    def test_a_drain_that_succeeded_earlier_in_the_history_is_ended_by_no_timeout_whatever_its_status_says_since(self) -> None:
        node = held("n1", holder="m1")
        succeeded, running = (State.of(T0, nodes=[node], policies=[pool()], maintenances=[nm("m1", "n1", status=st)])
                              for st in ({"phase": "Succeeded"}, {"phase": "Running"}))
        failed = running.put(maintenances=[nm("m1", "n1", status={"phase": "Failed", "lastError": "drain timed out after 45s"})])
        (found,) = violations([step(succeeded, running), step(running, failed)])
        assert found.startswith("NodeMaintenance m1: its drain had succeeded, yet it turned Failed")
        assert violations([step(running, running), step(running, failed)]) == []

    def test_a_take_that_leaves_the_node_uncordoned(self) -> None:
        before = State.of(T0, nodes=[free("n1")], policies=[pool()], maintenances=[nm("m1", "n1")])
        after = before.put(nodes=[free("n1", holder="m1", policy="p", taints=[dict(TAINT)])])
        assert violations([step(before, after, builders.take_patch(free("n1"), "m1", "p"))]) == ["node n1: held by m1 but not cordoned and tainted"]


class TestTurns:
    NODES = (free("n1"), free("n2"))

    @pytest.mark.parametrize(("taker", "node", "overtaken"), [("m2", "n2", "m1"), ("m1", "n1", "")])
    def test_the_first_in_line_takes_the_slot(self, taker: str, node: str, overtaken: str) -> None:
        line = [nm("m1", "n1", created=ago(200)), nm("m2", "n2", created=ago(100))]
        found = taking(list(self.NODES), node, taker, policy=pool(maxParallel=1), maintenances=[m for m in line if m["metadata"]["name"] != taker])
        expected = f"taken by NodeMaintenance {taker} under NodeMaintenancePolicy p ahead of the older NodeMaintenance {overtaken} (node n1)"
        assert [expected in f for f in found] == ([True] if overtaken else [])

    @pytest.mark.parametrize(("older_there_before", "taken_back", "overtaken"), [
        pytest.param(False, False, False, id="m1 fitted before m2 existed: its grant stands"),
        pytest.param(True, False, True, id="m2 waited all along: overtaken"),
        pytest.param(False, True, True, id="m1's grant taken back since by a limit lowered to 0, then raised again"),
    ])
    def test_a_take_ahead_of_one_stamped_older_by_a_clock_set_back_after_the_taker_fitted(self, older_there_before: bool, taken_back: bool,
                                                                                          overtaken: bool) -> None:
        """Seed 3094506084 of Windowed: m1 waited with room, so it may have been granted the slot then (its status
        write lost); m2, created later under a wall clock set back, is stamped older. The grant stands, unless taken back
        since; but had m2 waited all along, m1's take overtook it."""
        first, older = nm("m1", "n1", created=ago(100)), nm("m2", "n2", created=ago(200))
        line = [first, older] if older_there_before else [first]
        waited = State.of(T0 - datetime.timedelta(seconds=20), nodes=list(self.NODES), policies=[pool(maxParallel=1)], maintenances=line)
        between = waited.put(at=T0 - datetime.timedelta(seconds=10), policies=[pool(maxParallel=0 if taken_back else 1)])
        before = between.put(at=T0, maintenances=[older], policies=[pool(maxParallel=1)])
        found = violations([step(waited, between), step(between, between.put(at=T0)),
                            step(before, before.put(nodes=[held("n1", holder="m1")]), builders.take_patch(free("n1"), "m1", "p"))])
        assert [("ahead of the older NodeMaintenance m2 (node n2)" in f) for f in found] == ([True] if overtaken else [])

    def test_an_older_one_that_still_fits_is_no_overtaking(self) -> None:
        older = nm("m1", "n1", created=ago(200))
        assert taking(list(self.NODES), "n2", "m2", policy=pool(maxParallel=2), maintenances=[older]) == []

    def test_a_slot_granted_before_stands_whatever_came_since(self) -> None:
        granted = {"phase": "Running", "conditions": [{"type": "Queued", "status": "False", "reason": "SlotGranted"}]}
        older = nm("m1", "n1", created=ago(200))  # created after the grant, stamped older by a wall clock set back
        found = taking(list(self.NODES), "n2", "m2", policy=pool(maxParallel=1, windows=[{"schedule": "0 6 * * *", "duration": "2h"}]),
                       maintenances=[older])
        assert len(found) == 2  # out of its turn and while the window is closed, had it not been granted
        before = State.of(T0, nodes=list(self.NODES), policies=[pool(maxParallel=1, windows=[{"schedule": "0 6 * * *", "duration": "2h"}])],
                          maintenances=[older, nm("m2", "n2", status=granted)])
        assert violations([step(before, before.put(nodes=[held("n2", holder="m2")]), builders.take_patch(free("n2"), "m2", "p"))]) == []

    def test_an_older_one_kept_out_of_its_zone_by_another_take_of_the_same_step_is_not_overtaken_by_this_one(self) -> None:
        """m0 (stamped oldest: a wall clock set back) takes n0 in zone a, which keeps m1 (n1, zone a) waiting; m2 takes
        n2 in zone b in the same step, with room: m1's wait is m0's doing, and m0 was first in line."""
        zone = {"a": {**POOL, "zone": "a"}, "b": {**POOL, "zone": "b"}}
        nodes = [free("n0", labels=zone["a"]), free("n1", labels=zone["a"]), free("n2", labels=zone["b"])]
        line = [nm("m0", "n0", created=ago(300)), nm("m1", "n1", created=ago(200)), nm("m2", "n2", created=ago(100))]
        before = State.of(T0, nodes=nodes, maintenances=line,
                          policies=[pool(maxParallel=2, topologyLimits=[{"topologyKey": "zone", "maxParallel": 1}])])
        after = before.put(nodes=[held("n0", holder="m0", labels=zone["a"]), held("n2", holder="m2", labels=zone["b"])])
        both = [builders.take_patch(free("n0", labels=zone["a"]), "m0", "p"), builders.take_patch(free("n2", labels=zone["b"]), "m2", "p")]
        assert violations([step(before, after, *both)]) == []

    def test_an_older_one_taking_its_own_node_in_the_same_step_is_not_overtaken(self) -> None:
        line = [nm("m1", "n1", created=ago(200)), nm("m2", "n2", created=ago(100))]
        before = State.of(T0, nodes=list(self.NODES), policies=[pool(maxParallel=2)], maintenances=line)
        after = before.put(nodes=[held("n1", holder="m1"), held("n2", holder="m2")])
        both = [builders.take_patch(free("n1"), "m1", "p"), builders.take_patch(free("n2"), "m2", "p")]
        assert violations([step(before, after, *both)]) == []

    @pytest.mark.parametrize(("given_back_first", "overtaken"), [
        pytest.param(True, False, id="n3 given back before the take: its slot was the one taken"),
        pytest.param(False, True, id="n3 given back after the take: the take used m1's slot"),
    ])
    def test_a_take_of_the_slot_a_hand_back_of_the_same_step_freed_is_no_overtaking(self, given_back_first: bool, overtaken: bool) -> None:
        """Seed 1491276738 of Zoned: m1, older, was granted a slot and slowed by faults; within one step n3 was given
        back and m2 took the slot that freed, while m1's stayed free for it."""
        nodes = [free("n1"), free("n2"), held("n3", holder="m3")]
        line = [nm("m1", "n1", created=ago(200)), nm("m2", "n2", created=ago(100)), nm("m3", "n3", created=ago(300), deleted_at=ago(1))]
        before = State.of(T0, revision=50, nodes=nodes, policies=[pool(maxParallel=2)], maintenances=line)
        after = replace(before.put(nodes=[free("n3"), held("n2", holder="m2")]), revision=60)
        back, take = (replace(builders.give_back_patch(nodes[2], "m3"), revision=57 if given_back_first else 61),
                      replace(builders.take_patch(free("n2"), "m2", "p"), revision=58))
        found = violations([step(before, after, back, take)])
        assert [("ahead of the older NodeMaintenance m1 (node n1)" in f) for f in found] == ([True] if overtaken else [])

    def test_a_take_of_a_freed_slot_that_two_older_ones_waited_for_overtakes_the_second(self) -> None:
        """n3 given back frees a second slot of two: the line grants m0 and m1, both older, one each; m2 took one."""
        nodes = [free("n0"), free("n1"), free("n2"), held("n3", holder="m3")]
        line = [nm("m0", "n0", created=ago(250)), nm("m1", "n1", created=ago(200)), nm("m2", "n2", created=ago(100)),
                nm("m3", "n3", created=ago(300), deleted_at=ago(1))]
        before = State.of(T0, revision=50, nodes=nodes, policies=[pool(maxParallel=2)], maintenances=line)
        after = replace(before.put(nodes=[free("n3"), held("n2", holder="m2")]), revision=60)
        back, take = (replace(builders.give_back_patch(nodes[3], "m3"), revision=57), replace(builders.take_patch(free("n2"), "m2", "p"), revision=58))
        found = violations([step(before, after, back, take)])
        assert [f for f in found if "ahead of" in f] == [
            "node n2 taken by NodeMaintenance m2 under NodeMaintenancePolicy p ahead of the older NodeMaintenance m1 (node n1), which waited for the slot it took"]

    def test_a_take_of_the_slot_an_older_one_gave_back_by_its_timeout_in_the_same_step_is_no_overtaking(self) -> None:
        """Seed 2151111732 of Retiring: m1, older, held n1 and was ended by its timeout within the step, giving n1 back;
        m2 took the slot next. m1 held its node as the step began: it waited for nothing."""
        timed_out = {"phase": "Failed", "conditions": [{"type": "TimedOut", "status": "True", "reason": "HandedBack"}]}
        line = [nm("m1", "n1", created=ago(200), status={"phase": "Running"}), nm("m2", "n2", created=ago(100))]
        before = State.of(T0, revision=50, nodes=[held("n1", holder="m1"), free("n2")], policies=[pool(maxParallel=1)], maintenances=line)
        after = replace(before.put(nodes=[free("n1"), held("n2", holder="m2")], maintenances=[nm("m1", "n1", created=ago(200), status=timed_out)]),
                        revision=60)
        back = replace(builders.give_back_patch(dict(before.nodes["n1"]), "m1"), revision=57)
        take = replace(builders.take_patch(free("n2"), "m2", "p"), revision=58)
        assert [f for f in violations([step(before, after, back, take)]) if "ahead of" in f] == []

    @pytest.mark.parametrize(("schedule", "closed"), [("0 11 * * *", False), ("0 6 * * *", True)])
    def test_a_take_only_while_a_window_is_open(self, schedule: str, closed: bool) -> None:
        found = taking(list(self.NODES), "n1", "m1", policy=pool(windows=[{"schedule": schedule, "duration": "2h"}]))
        assert found == (["node n1 taken by NodeMaintenance m1 while no window of NodeMaintenancePolicy p was open"] if closed else [])

    # Each: the history before a take at T0 (12:00), just after a window closed, by m1 of n1 (maxParallel 1), as states
    # from the oldest (seconds before T0, whether m2 then held n2, m1's uid), and whether the operator started since.
    @pytest.mark.parametrize(("states", "started", "out_of_turn"), [
        pytest.param([(360, False, None)], False, False, id="it fitted in the window just closed: a grant then stands"),
        pytest.param([(360, True, None)], False, True, id="it had no room in that window: no grant"),
        pytest.param([(360, False, None)], True, True, id="the operator started since: a grant in its memory is gone"),
        pytest.param([(360, False, "old")], False, True, id="another NodeMaintenance of its name fitted, not this one"),
        pytest.param([(4200, False, None), (1800, True, None), (360, True, None)], False, True, id="it fitted in an earlier window only"),
    ])
    def test_a_take_after_the_window_closed_by_one_that_fitted_while_it_was_open(
            self, states: list[tuple[int, bool, str | None]], started: bool, out_of_turn: bool) -> None:
        """A slot granted while the window was open stands through its close, even one the status never showed (seed
        1373037640: the drain held, the policies unknown a moment, before writing it)."""
        policy = pool(maxParallel=1, windows=[{"schedule": "45 * * * *", "duration": "10m"}])  # open from :45 to :55 of every hour
        history = [State.of(T0 - datetime.timedelta(seconds=before), policies=[policy], maintenances=[nm("m1", "n1", uid=uid), nm("m2", "n2")],
                            nodes=[free("n1"), held("n2", holder="m2") if n2_held else free("n2")])
                   for before, n2_held, uid in states]
        closed = State.of(T0 - datetime.timedelta(seconds=60), policies=[policy], maintenances=[nm("m1", "n1"), nm("m2", "n2")],
                          nodes=[free("n1"), free("n2")])
        leading = [*history, closed]
        steps = [step(a, b) for a, b in itertools.pairwise(leading)]
        found = violations([*steps, step(closed, closed.put(at=T0), started=started),
                            step(closed.put(at=T0), closed.put(at=T0, nodes=[held("n1", holder="m1")]), builders.take_patch(free("n1"), "m1", "p"))])
        assert found == (["node n1 taken by NodeMaintenance m1 while no window of NodeMaintenancePolicy p was open"] if out_of_turn else [])

    def test_a_take_at_the_close_by_one_an_operator_started_in_the_window_granted(self) -> None:
        """Seed 1675138370 of Closing: the operator started again a second before the window closed and granted the slot
        at once, within the step it started before; it took the node in the next, after the close."""
        policy = pool(maxParallel=1, windows=[{"schedule": "45 * * * *", "duration": "10m"}])  # open from :45 to :55 of every hour
        in_window = State.of(T0 - datetime.timedelta(seconds=301), policies=[policy], maintenances=[nm("m1", "n1"), nm("m2", "n2")],
                             nodes=[free("n1"), free("n2")])
        closed = in_window.put(at=T0 - datetime.timedelta(seconds=300))
        taken = closed.put(at=T0, nodes=[held("n1", holder="m1")])
        assert violations([step(in_window, closed, started=True), step(closed, taken, builders.take_patch(free("n1"), "m1", "p"))]) == []

    @pytest.mark.parametrize(("zone_of_m0", "out_of_turn"), [
        pytest.param("a", False, id="an older one waited in another zone: both were granted"),
        pytest.param("b", True, id="an older one waited in its zone: the slot was the older one's"),
    ])
    def test_a_take_after_the_window_closed_by_one_granted_beside_an_older_one(self, zone_of_m0: str, out_of_turn: bool) -> None:
        """Seed 1253708182 of Closing: the line grants in creation order while the limits have room, so a younger one in
        another topology domain was granted in the window too, and took its node after the close."""
        zone = {"a": {**POOL, "zone": "a"}, "b": {**POOL, "zone": "b"}}
        policy = pool(maxParallel=2, topologyLimits=[{"topologyKey": "zone", "maxParallel": 1}],
                      windows=[{"schedule": "45 * * * *", "duration": "10m"}])  # open from :45 to :55 of every hour
        nodes = [free("n0", labels=zone[zone_of_m0]), free("n1", labels=zone["b"])]
        line = [nm("m0", "n0", created=ago(500)), nm("m1", "n1", created=ago(400))]
        opened = State.of(T0 - datetime.timedelta(seconds=360), policies=[policy], maintenances=line, nodes=nodes)
        closed = opened.put(at=T0 - datetime.timedelta(seconds=60))
        taken = closed.put(at=T0, nodes=[held("n1", holder="m1", labels=zone["b"])])
        found = violations([step(opened, closed), step(closed, taken, builders.take_patch(nodes[1], "m1", "p"))])
        assert ("node n1 taken by NodeMaintenance m1 while no window of NodeMaintenancePolicy p was open" in found) is out_of_turn

    @pytest.mark.parametrize(("room", "restarted", "out_of_turn"), [
        pytest.param(True, False, False, id="it fitted while the policy was deleted moments ago: a grant then stands"),
        pytest.param(False, False, True, id="it had no room then: no grant"),
        pytest.param(True, True, True, id="the operator started after the deletion: it never saw the policy, no grant"),
    ])
    def test_a_take_after_the_window_closed_by_one_that_fitted_under_a_policy_replaced_since(self, room: bool, restarted: bool,
                                                                                              out_of_turn: bool) -> None:
        """Seed 1091069782 of Windowed: m1 was created and its policy deleted by a replace at one instant; the operator
        granted its slot in the window under the policy it had seen, which still paces for its grace. The states show m1
        only with the policy gone, yet the grant stands, under the policy of its name that replaced it, through the
        window's close; unless m1 had no room then, or the operator started after the deletion and so never saw it."""
        policy = pool(maxParallel=1, windows=[{"schedule": "45 * * * *", "duration": "10m"}])  # open from :45 to :55 of every hour
        old = {**policy, "metadata": {**policy["metadata"], "uid": "old", "resourceVersion": "2"}}
        new = {**policy, "metadata": {**policy["metadata"], "uid": "new", "resourceVersion": "4"}}
        line, n2 = [nm("m1", "n1"), nm("m2", "n2")], free("n2") if room else held("n2", holder="m2")
        before = State.of(T0 - datetime.timedelta(seconds=400), revision=1, policies=[old], maintenances=line[1:], nodes=[free("n1"), n2])
        gone = State.of(T0 - datetime.timedelta(seconds=380), revision=3, maintenances=line, nodes=[free("n1"), n2], departed=[old])
        closed = State.of(T0 - datetime.timedelta(seconds=60), revision=5, policies=[new], maintenances=line, nodes=[free("n1"), free("n2")])
        found = violations([step(before, gone, started=restarted), step(gone, closed), step(closed, closed.put(at=T0)),
                            step(closed.put(at=T0), closed.put(at=T0, nodes=[held("n1", holder="m1")]), builders.take_patch(free("n1"), "m1", "p"))])
        assert found == (["node n1 taken by NodeMaintenance m1 while no window of NodeMaintenancePolicy p was open"] if out_of_turn else [])

    @pytest.mark.parametrize(("windows_removed", "last_uid", "out_of_turn"), [
        pytest.param(True, "old", False, id="its windows removed before the deletion: it fitted, always open, and a grant stands"),
        pytest.param(True, "between", False, id="a policy created and deleted between the states without windows: a grant stands"),
        pytest.param(False, "old", True, id="deleted as the states showed it: every window closed, no grant"),
    ])
    def test_a_take_after_a_replace_by_one_that_fitted_under_the_policy_as_it_was_deleted(self, windows_removed: bool, last_uid: str,
                                                                                          out_of_turn: bool) -> None:
        """Seed 1550767387 of Closing: the policy's windows were removed and the policy deleted by a replace between two
        states (or, among its first histories, a policy created again by one replace and deleted by the next, unseen by
        any state), m1 created meanwhile; the operator's watch brought them, and it granted m1's slot under the policy
        deleted moments ago, without windows. The new policy, windowed again, found the grant standing. A policy deleted
        is put back as the API last held it, not as the states last showed it."""
        windowed = pool(maxParallel=1, windows=[{"schedule": "45 * * * *", "duration": "10m"}])  # open from :45 to :55 of every hour
        shown = {**windowed, "metadata": {**windowed["metadata"], "uid": "old", "resourceVersion": "2"}}
        unwindowed = pool(maxParallel=1)
        last = {**(unwindowed if windows_removed else windowed), "metadata": {**windowed["metadata"], "uid": last_uid, "resourceVersion": "3"}}
        new = {**windowed, "metadata": {**windowed["metadata"], "uid": "new", "resourceVersion": "5"}}
        before = State.of(T0 - datetime.timedelta(seconds=300), revision=2, policies=[shown], nodes=[free("n1")])
        gone = State.of(T0 - datetime.timedelta(seconds=280), revision=4, maintenances=[nm("m1", "n1")], nodes=[free("n1")], departed=[last])
        closed = State.of(T0 - datetime.timedelta(seconds=270), revision=6, policies=[new], maintenances=[nm("m1", "n1")], nodes=[free("n1")])
        found = violations([step(before, gone), step(gone, closed), step(closed, closed.put(at=T0)),
                            step(closed.put(at=T0), closed.put(at=T0, nodes=[held("n1", holder="m1")]), builders.take_patch(free("n1"), "m1", "p"))])
        assert found == (["node n1 taken by NodeMaintenance m1 while no window of NodeMaintenancePolicy p was open"] if out_of_turn else [])

    @pytest.mark.parametrize(("deleted_for", "out_of_turn"), [(61, True), (20, False)])
    def test_the_grace_of_a_policy_deleted_under_which_a_slot_stands_runs_on_the_steps_not_on_a_wall_clock_set_back(
            self, deleted_for: int, out_of_turn: bool) -> None:
        """A policy deleted, and the wall clock set back an hour: ``deleted_for`` seconds of steps after the deletion, m1
        waits in an open window of the clock set back. Past the grace the operator paced by the policy no more and granted
        nothing under it, whatever the wall clock says; within it, a grant stands."""
        policy = pool(maxParallel=1, windows=[{"schedule": "45 * * * *", "duration": "10m"}])  # open from :45 to :55 of every hour
        old = {**policy, "metadata": {**policy["metadata"], "uid": "old"}}
        new = {**policy, "metadata": {**policy["metadata"], "uid": "new"}}
        line, nodes, hour = [nm("m1", "n1")], [free("n1")], datetime.timedelta(hours=1)
        shown = State.of(T0 - datetime.timedelta(minutes=15), policies=[old], nodes=nodes)
        deleted = State.of(shown.at + datetime.timedelta(seconds=deleted_for), nodes=nodes)
        waiting = State.of(deleted.at - hour, maintenances=line, nodes=nodes)  # the clock set back between two steps
        closed = State.of(T0 - hour - datetime.timedelta(seconds=60), policies=[new], maintenances=line, nodes=nodes)
        found = violations([step(shown, deleted), step(waiting, closed), step(closed, closed.put(at=T0 - hour)),
                            step(closed.put(at=T0 - hour), closed.put(at=T0 - hour, nodes=[held("n1", holder="m1")]), builders.take_patch(free("n1"), "m1", "p"))])
        assert found == (["node n1 taken by NodeMaintenance m1 while no window of NodeMaintenancePolicy p was open"] if out_of_turn else [])

class TestRecovery:
    def dropping(self, since: int, replicas: dict[str, int]) -> list[str]:
        entry = {"node": "n1", "since": ago(since), "workloads": [{"kind": "ReplicaSet", "namespace": "ns", "name": "web"}]}
        rs = {"metadata": {"name": "web", "namespace": "ns", "generation": 1}, "spec": {"replicas": replicas["wanted"]}, "status": {"observedGeneration": 1, "availableReplicas": replicas["available"]}}
        before = State.of(T0, nodes=[free("n1")], policies=[pool(waitForHealthy=True, status={"recovering": [entry]})], replicasets=[rs])
        return violations([step(before, before.put(policies=[pool(waitForHealthy=True, status={"recovering": [{"node": "n9", "since": ago(1), "workloads": []}]})]))])

    @pytest.mark.parametrize(("since", "available", "broken"), [
        (60, 1, ("node n1 dropped from NodeMaintenancePolicy p's status.recovering after 60s of its 600s (waitForHealthySeconds) "
                 "while ReplicaSet ns/web: 1 of 3 available")),
        (60, 3, ""),
        (700, 1, ""),
    ])
    def test_a_recovering_node_keeps_its_slot_until_healthy_or_the_cap(self, since: int, available: int, broken: str) -> None:
        assert self.dropping(since, {"wanted": 3, "available": available}) == ([broken] if broken else [])

    def test_a_node_dropped_while_its_workloads_were_healthy_at_the_step_s_start_is_fine(self) -> None:
        """Judged within the step: the workload was healthy when it started, a pod left since (news to the next judgement)."""
        entry = {"node": "n1", "since": ago(60), "workloads": [{"kind": "ReplicaSet", "namespace": "ns", "name": "web"}]}

        def replicaset(available: int) -> dict[str, Any]:
            return {"metadata": {"name": "web", "namespace": "ns", "generation": 1}, "spec": {"replicas": 3},
                    "status": {"observedGeneration": 1, "availableReplicas": available}}

        before = State.of(T0, nodes=[free("n1")], policies=[pool(waitForHealthy=True, status={"recovering": [entry]})], replicasets=[replicaset(3)])
        after = before.put(policies=[pool(waitForHealthy=True, status={"recovering": []})], replicasets=[replicaset(2)])
        assert violations([step(before, after)]) == []


    def test_an_entry_is_kept_while_its_node_is_held_and_its_cap_counts_from_the_hand_back(self) -> None:
        """Written before the hand-back, the entry waits for it; the cap then counts from the step that gave the node back,
        however old ``since`` is (seed 1908195234 of Rolling: a hand-back the API refused past the cap)."""
        entry = {"node": "n1", "since": ago(900), "workloads": [{"kind": "ReplicaSet", "namespace": "ns", "name": "web"}]}
        listing, dropped = pool(waitForHealthy=True, status={"recovering": [entry]}), pool(waitForHealthy=True, status={"recovering": []})
        held_n1 = State.of(T0, nodes=[held("n1", holder="m1")], maintenances=[nm("m1", "n1")], policies=[listing], replicasets=[replicaset("web", 1)])
        assert violations([step(held_n1, held_n1.put(policies=[dropped]))]) == [
            "node n1 dropped from NodeMaintenancePolicy p's status.recovering while NodeMaintenance m1 still holds it: its wait begins when it is given back"]
        back = held_n1.put(at(1), nodes=[free("n1")]).drop("maintenances", "m1")
        later = back.put(at(60))
        steps = [step(held_n1, back, builders.give_back_patch(held("n1", holder="m1"), "m1")), step(back, later)]
        assert violations([*steps, step(later, later.put(policies=[dropped]))]) == [
            ("node n1 dropped from NodeMaintenancePolicy p's status.recovering after 60s of its 600s (waitForHealthySeconds) "
             "while ReplicaSet ns/web: 1 of 3 available")]


    @pytest.mark.parametrize(("healthy_then", "broken"), [(True, False), (False, True)])
    def test_a_drop_judged_healthy_a_step_before_it_was_written_is_fine(self, healthy_then: bool, broken: bool) -> None:
        """Seeds 790498942 and 791627584 of Rolling: the workloads were healthy in the step that gave the node back, the
        status dropping it was written the step after, when a pod had left again."""
        entry = {"node": "n1", "since": ago(1), "workloads": [{"kind": "ReplicaSet", "namespace": "ns", "name": "web"}]}
        listing, dropped = pool(waitForHealthy=True, status={"recovering": [entry]}), pool(waitForHealthy=True, status={"recovering": []})
        held_n1 = State.of(T0, nodes=[held("n1", holder="m1")], maintenances=[nm("m1", "n1")], policies=[listing],
                           replicasets=[replicaset("web", 3 if healthy_then else 2)])
        back = held_n1.put(at(1), nodes=[free("n1")]).drop("maintenances", "m1")
        short = back.put(at(2), replicasets=[replicaset("web", 2)])
        steps = [step(held_n1, back, builders.give_back_patch(held("n1", holder="m1"), "m1")), step(back, short)]
        found = violations([*steps, step(short, short.put(at(3), policies=[dropped]))])
        assert [f.split(" after ")[0] for f in found] == (["node n1 dropped from NodeMaintenancePolicy p's status.recovering"] if broken else [])


def replicaset(name: str, available: int, replicas: int = 3) -> dict[str, Any]:
    """ReplicaSet ns/``name`` of ``replicas``, ``available`` of them available."""
    return {"metadata": {"name": name, "namespace": "ns", "generation": 1}, "spec": {"replicas": replicas},
            "status": {"observedGeneration": 1, "availableReplicas": available}}


def at(seconds: int) -> datetime.datetime:
    return T0 + datetime.timedelta(seconds=seconds)


class TestGivenBack:
    """A node given back under waitForHealthy keeps its slot as the history shows it, whatever the policy's status says:
    here the operator never writes status.recovering."""

    WAITING = pool(maxParallel=1, waitForHealthy=True, waitForHealthySeconds=120)

    def maintained(self, state: State, holder: str, evicted: dict[str, Any], unhealthy: dict[str, Any], since: int) -> list[Any]:
        """The steps in which ``holder`` takes n1, evicts ``evicted`` (its workload then ``unhealthy``), is deleted and gives
        n1 back at ``since`` seconds."""
        key = f"ns/{evicted['metadata']['name']}"
        with_it = state.put(at(since - 2), maintenances=[nm(holder, "n1")], pods=[evicted])
        taken = with_it.put(nodes=[held("n1", holder=holder)])
        drained = taken.put(at(since - 1), replicasets=[unhealthy]).drop("pods", key)
        back = drained.put(at(since), nodes=[free("n1")]).drop("maintenances", holder)
        return [step(with_it, taken, builders.take_patch(free("n1"), holder, "p")),
                step(taken, drained, EVICT(key, maintenance=holder)),
                step(drained, back, builders.give_back_patch(held("n1", holder=holder), holder))]

    def take_n2(self, steps: list[Any], seconds: int, **changes: Any) -> list[str]:
        """``steps``, then time passing to ``seconds`` with ``changes``, then m2 taking n2 under maxParallel 1."""
        last = steps[-1].after
        now = last.put(at(seconds), **changes)
        steps = [*steps, step(last, now), step(now, now.put(nodes=[held("n2", holder="m2")]), builders.take_patch(free("n2"), "m2", "p"))]
        return violations(steps)

    def start(self, policy: dict[str, Any] | None = None) -> State:
        return State.of(T0, nodes=[free("n1"), free("n2"), free("n3")], policies=[policy or self.WAITING], maintenances=[nm("m2", "n2")],
                        replicasets=[replicaset("web", 3), replicaset("db", 1, 1)])

    def first(self, policy: dict[str, Any] | None = None) -> list[Any]:
        """m1 evicts a web pod and gives n1 back at 10 s, web 2 of 3 available."""
        return self.maintained(self.start(policy), "m1", pod("a", owner_name="web", node="n1"), replicaset("web", 2), 10)

    def test_a_node_given_back_with_nothing_recorded_still_keeps_its_slot(self) -> None:
        (found,) = self.take_n2(self.first(), 60)
        assert "node n2 taken by NodeMaintenance m2; NodeMaintenancePolicy p: 2 nodes in maintenance (n1, n2), maxParallel allows 1" in found

    @pytest.mark.parametrize(("case", "seconds", "changes"), [
        ("healthy again", 60, {"replicasets": [replicaset("web", 3)]}),
        ("the cap passed", 131, {}),
        ("the policy replaced", 60, {"policies": [{**WAITING, "metadata": {"name": "p", "uid": "another"}}]}),
        ("the policy no longer waits", 60, {"policies": [pool(maxParallel=1)]}),
    ])
    def test_its_slot_is_free_once(self, case: str, seconds: int, changes: dict[str, Any]) -> None:
        assert self.take_n2(self.first(), seconds, **changes) == []

    @pytest.mark.parametrize(("healthy_at", "broken"), [(7, False), (9, True)])
    def test_a_recovery_ended_within_a_step_frees_its_slot_for_a_take_written_after(self, healthy_at: int, broken: bool) -> None:
        """Seed 3774077545 of Zoned: web became healthy within a step, and the operator, told, took the next node in the
        same step. Healthy only after the take's write (a later resourceVersion), web still held the slot then."""
        steps = self.first()
        last = steps[-1].after
        now = last.put(at(60))
        healthy = replicaset("web", 3)
        healthy = {**healthy, "metadata": {**healthy["metadata"], "resourceVersion": str(healthy_at)}}
        take = replace(builders.take_patch(free("n2"), "m2", "p"), revision=8)
        found = violations([*steps, step(last, now), step(now, now.put(nodes=[held("n2", holder="m2")], replicasets=[healthy]), take)])
        assert [("2 nodes in maintenance (n1, n2)" in f) for f in found] == ([True] if broken else [])

    def test_a_wall_clock_set_forward_ends_no_wait(self) -> None:
        """Seed 2316501198 of Rolling: the wall clock jumped an hour between two steps, and the next node was taken at once.
        The wait counts the steps' own time, as the operator counts its monotonic clock."""
        steps = self.first()
        jumped = steps[-1].after.put(at(3600))
        (found,) = self.take_n2([*steps, step(jumped, jumped)], 3600)
        assert "2 nodes in maintenance (n1, n2)" in found

    @pytest.mark.parametrize(("case", "known", "listed", "uid", "broken"), [
        ("listed as it is given back", True, True, "", False),
        ("not listed: its slot freed at once", True, False, "", True),
        ("waitForHealthy switched on as it was given back", False, False, "", False),
        ("the policy replaced as it was given back: listed in the object before", True, False, "another", False),
    ])
    def test_a_node_given_back_under_waitForHealthy_is_listed_as_recovering(self, case: str, known: bool, listed: bool, uid: str,
                                                                            broken: bool) -> None:
        """Written before the hand-back, by a deletion and by onTimeout HandBack alike (break 3 of the issue "Safety found
        by search": a timed-out hand-back recorded nothing, and the next node was taken in the same step). ``known``:
        the policy waited for health as the step before ended; ``uid``: the policy's as the node is given back."""
        entry = {"node": "n1", "since": ago(0), "workloads": [{"kind": "ReplicaSet", "namespace": "ns", "name": "web"}]}
        held_n1 = State.of(T0, nodes=[held("n1", holder="m1")], maintenances=[nm("m1", "n1")], policies=[self.WAITING if known else pool(maxParallel=1)],
                           replicasets=[replicaset("web", 2)])
        deleted = held_n1.put(at(1), maintenances=[nm("m1", "n1", deleted_at=ago(0))])
        now = pool(maxParallel=1, waitForHealthy=True, waitForHealthySeconds=120, status={"recovering": [entry]} if listed else None)
        back = deleted.put(at(2), nodes=[free("n1")], policies=[{**now, "metadata": {**now["metadata"], "uid": uid}} if uid else now])
        found = violations([step(held_n1, deleted), step(deleted, back, builders.give_back_patch(held("n1", holder="m1"), "m1"))])
        unlisted = ("node n1 given back by NodeMaintenance m1 under NodeMaintenancePolicy p, which waits for health, without "
                    "being listed in its status.recovering: its slot was freed at once")
        assert found == ([unlisted] if broken else []), case

    def test_what_a_drain_evicted_before_waitForHealthy_was_switched_on_is_waited_for(self) -> None:
        """Every drain records what it evicts: switched on (or the node relabelled into a pool that waits) while the
        node is held, the hand-back waits for what the drain evicted before."""
        taken, evicted, _ = self.first(pool(maxParallel=1))
        waits = evicted.after.put(at(9), policies=[self.WAITING])
        back = waits.put(at(10), nodes=[free("n1")]).drop("maintenances", "m1")
        steps = [taken, evicted, step(evicted.after, waits), step(waits, back, builders.give_back_patch(held("n1", holder="m1"), "m1"))]
        (found,) = self.take_n2(steps, 60)
        assert "2 nodes in maintenance (n1, n2), maxParallel allows 1" in found

    def test_nothing_is_kept_without_waitForHealthy_when_given_back(self) -> None:
        assert self.take_n2(self.first(pool(maxParallel=1)), 60) == []

    @pytest.mark.parametrize(("db_healthy", "seconds", "kept"), [(True, 200, True), (False, 200, True), (True, 250, False)])
    def test_a_node_maintained_again_while_recovering_waits_for_both_drains_workloads_from_its_new_hand_back(
            self, db_healthy: bool, seconds: int, kept: bool) -> None:
        """Given back at 10 s (web unhealthy), taken again by m3, which evicts a db pod and gives n1 back at 120 s: the
        slot is kept for web, still unhealthy, until 240 s, although the first hand-back's cap passed at 130 s."""
        steps = self.first()
        steps += self.maintained(steps[-1].after, "m3", pod("d", owner_name="db", node="n1"), replicaset("db", 0, 1), 120)
        found = self.take_n2(steps, seconds, replicasets=[replicaset("db", 1 if db_healthy else 0, 1)])
        assert [("2 nodes in maintenance (n1, n2)" in f) for f in found] == ([True] if kept else [])


class TestSettled:
    def ending(self, *maintenances: dict[str, Any], nodes: list[dict[str, Any]] | None = None, policy: dict[str, Any] | None = None) -> list[str]:
        end = State.of(T0, nodes=nodes or [held("n1", holder="m1"), free("n2")], policies=[policy or pool(maxParallel=1)], maintenances=maintenances)
        return settled([step(end, end)], T0 - datetime.timedelta(seconds=60))

    def test_a_drained_maintenance_and_one_waiting_in_line_are_settled(self) -> None:
        queued = {"phase": "Pending", "conditions": [{"type": "Queued", "status": "True", "reason": "WaitingForSlot", "message": "1st in line"}]}
        assert self.ending(nm("m1", "n1", status={"phase": "Succeeded"}), nm("m2", "n2", status=queued)) == []

    def test_a_wait_for_a_slot_the_policy_has(self) -> None:
        queued = {"phase": "Pending", "conditions": [{"type": "Queued", "status": "True", "reason": "WaitingForSlot", "message": "1st in line"}]}
        (found,) = self.ending(nm("m2", "n2", status=queued), nodes=[free("n1"), free("n2")])
        assert found == "NodeMaintenance m2: waits for a slot of NodeMaintenancePolicy p, which has room for node n2, 60s after the last fault"

    @pytest.mark.parametrize(("maintenance", "broken"), [
        (nm("m1", "n1", deleted_at=ago(5)), "NodeMaintenance m1: deleted but still kept by finalizers"),
        (nm("m1", "n1", status={"phase": "Running"}), "NodeMaintenance m1: Running on node n1 without saying why"),
        (nm("m1", "n1", status={"phase": "Running", "lastError": "waiting for budget ns/web"}), ""),
        (nm("m9", "n1", status={"phase": "Succeeded"}), "node n1: still held by NodeMaintenance m1, which is gone"),
    ])
    def test_what_is_left_unfinished(self, maintenance: dict[str, Any], broken: str) -> None:
        found = self.ending(maintenance)
        assert [broken in f for f in found] == ([True] if broken else [])

    def test_a_succeeded_maintenance_whose_node_is_not_drained(self) -> None:
        end = State.of(T0, nodes=[held("n1", holder="m1")], pods=[pod("a")], maintenances=[nm("m1", "n1", status={"phase": "Succeeded"})])
        assert settled([step(end, end)], T0) == ["NodeMaintenance m1: Succeeded but node n1 not drained, ns/a still there, 0s after the last fault"]

    @pytest.mark.parametrize(("maintenance", "recovering", "quiet", "rests"), [
        (nm("m1", "n1", status={"phase": "Succeeded"}), [], 120, True),
        (nm("m1", "n1", status={"phase": "Succeeded"}), [], 119, False),  # not quiet long enough: a recheck may come
        (nm("m1", "n3", status={"phase": "Failed", "conditions": [{"type": "TimedOut", "status": "True"}]}), [], 120, True),  # ended
        (nm("m1", "n1", status={"phase": "Succeeded"}), [{"node": "n2", "since": "2026-01-05T08:00:00Z"}], 120, False),  # a wait for health
        (nm("m1", "n1", status={"phase": "Running", "lastError": "waiting for budget ns/web"}), [], 120, False),  # a drain that waits
        (nm("m1", "n1", deleted_at=ago(5), status={"phase": "Succeeded"}), [], 120, False),  # a deletion under way
        (nm("m1", "n9", status={"phase": "Pending", "lastError": "node n9 not found"}), [], 120, False),  # waits for its node
    ])
    def test_a_history_at_rest_only_once_every_maintenance_finished_and_nothing_moved(
            self, maintenance: dict[str, Any], recovering: list[dict[str, Any]], quiet: int, rests: bool) -> None:
        end = State.of(T0, nodes=[held("n1", holder="m1"), free("n2")], maintenances=[maintenance],
                       policies=[pool({"recovering": recovering}, maxParallel=1, waitForHealthy=True)])
        moved = replace(end, nodes={**end.nodes, "n2": free("n2", unschedulable=True)})
        history = [step(moved, end), *(step(end, end) for _ in range(quiet))]
        assert at_rest(history) is rests
