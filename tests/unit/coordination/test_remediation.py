"""Coordination with remediation: the medik8s Lease semantics, and the node given back with its label as it was
(what the planner makes of a Lease is in tests/unit/drain/test_planner.py)."""

from __future__ import annotations

import json

from node_maintenance.coordination import remediation
from node_maintenance.drain import nodes
from tests.unit.builders import NOW, lease, stamp, worker_1

NODE = worker_1()


def test_the_lease_is_named_after_the_node_as_medik8s_names_it() -> None:
    assert remediation.lease_name("Worker-1") == "node-worker-1"


def test_a_valid_lease_of_another_holder_refuses_an_expired_one_does_not() -> None:
    assert remediation.other_holder(lease("NodeHealthCheck", 10), NOW) == "NodeHealthCheck"
    assert remediation.other_holder(lease("NodeHealthCheck", 3601), NOW) is None  # expired: may be taken over
    assert remediation.other_holder(lease("NodeHealthCheck", -60), NOW) is None  # renewed in the future: not valid
    assert remediation.other_holder(lease(remediation.HOLDER_IDENTITY, 10), NOW) is None  # ours
    assert remediation.other_holder(None, NOW) is None
    assert remediation.other_holder({"metadata": {}, "spec": {"holderIdentity": "x"}}, NOW) is None  # never renewed


def test_claiming_creates_takes_over_or_renews() -> None:
    created = remediation.claimed(None, NODE, "medik8s-leases", NOW)
    assert created["metadata"] == {"name": "node-worker-1", "namespace": "medik8s-leases",
                                   "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "Worker-1", "uid": "u1"}]}
    spec = created["spec"]
    assert spec["holderIdentity"] == remediation.HOLDER_IDENTITY and spec["leaseDurationSeconds"] == 60  # a first term: a late create holds little
    assert spec["acquireTime"] == spec["renewTime"] == stamp(0) and spec["leaseTransitions"] == 0
    taken = remediation.claimed(lease("NodeHealthCheck", 4000, leaseTransitions=2, acquireTime=stamp(5000)), NODE, "medik8s-leases", NOW)
    assert taken["spec"]["leaseTransitions"] == 3 and taken["spec"]["acquireTime"] == stamp(0)
    assert taken["metadata"]["resourceVersion"] == "3"  # the update is a compare-and-swap
    assert taken["spec"]["leaseDurationSeconds"] == remediation.REMEDIATION_LEASE_SECONDS
    renewed = remediation.claimed(lease(remediation.HOLDER_IDENTITY, 2000, leaseTransitions=1, acquireTime=stamp(2000)), NODE, "medik8s-leases", NOW)
    assert renewed["spec"]["renewTime"] == stamp(0) and renewed["spec"]["acquireTime"] == stamp(2000)
    assert renewed["spec"]["leaseTransitions"] == 1 and renewed["spec"]["leaseDurationSeconds"] == remediation.REMEDIATION_LEASE_SECONDS


def test_the_label_is_set_and_given_back_exactly_as_it_was() -> None:
    for before in (None, "true", "false"):
        labels = {} if before is None else {remediation.EXCLUDE_LABEL: before}
        node = {**NODE, "metadata": {**NODE["metadata"], "labels": labels}}
        patch = remediation.exclude(node, nodes.begin_patch(node, "nm"))
        assert patch["metadata"]["labels"] == {remediation.EXCLUDE_LABEL: "true"}
        assert json.loads(patch["metadata"]["annotations"][remediation.LABEL_BEFORE]) == before
        held = {**node, "metadata": {**node["metadata"], "labels": {remediation.EXCLUDE_LABEL: "true"},
                                     "annotations": {**patch["metadata"]["annotations"]}}}
        # Again (an operator restarted): the record of the original state is kept.
        assert remediation.LABEL_BEFORE not in remediation.exclude(held, nodes.begin_patch(held, "nm"))["metadata"]["annotations"]
        end = remediation.restore(held, nodes.end_patch(held))
        assert end["metadata"]["labels"] == {remediation.EXCLUDE_LABEL: before} and end["metadata"]["annotations"][remediation.LABEL_BEFORE] is None


def test_a_node_never_labelled_keeps_its_label_untouched() -> None:
    node = {**NODE, "metadata": {**NODE["metadata"], "labels": {remediation.EXCLUDE_LABEL: "true"}}}
    assert "labels" not in remediation.restore(node, nodes.end_patch(node))["metadata"]
