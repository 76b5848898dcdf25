"""Coordination with remediation: the medik8s Lease semantics, and the node given back with its label as it was."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import yaml

from node_maintenance.coordination import remediation as rem
from node_maintenance.drain import node as nodes
from node_maintenance.drain.planner import Maintenance, plan
from node_maintenance_packaging import cli

ROOT = Path(__file__).resolve().parents[2]

NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
NODE = {"metadata": {"name": "Worker-1", "uid": "u1", "resourceVersion": "7", "labels": {}, "annotations": {}}, "spec": {}}


def stamp(seconds_ago: float) -> str:
    return (NOW - datetime.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def a_lease(holder: str, renewed_ago: float, duration: int = 3600, **spec) -> dict:
    return {"metadata": {"name": "node-worker-1", "namespace": "medik8s-leases", "resourceVersion": "3"},
            "spec": {"holderIdentity": holder, "renewTime": stamp(renewed_ago), "leaseDurationSeconds": duration, **spec}}


def test_the_lease_is_named_after_the_node_as_medik8s_names_it() -> None:
    assert rem.lease_name("Worker-1") == "node-worker-1"


def test_a_valid_lease_of_another_holder_refuses_an_expired_one_does_not() -> None:
    assert rem.other_holder(a_lease("NodeHealthCheck", 10), NOW) == "NodeHealthCheck"
    assert rem.other_holder(a_lease("NodeHealthCheck", 3601), NOW) is None  # expired: may be taken over
    assert rem.other_holder(a_lease("NodeHealthCheck", -60), NOW) is None  # renewed in the future: not valid
    assert rem.other_holder(a_lease(rem.HOLDER_IDENTITY, 10), NOW) is None  # ours
    assert rem.other_holder(None, NOW) is None
    assert rem.other_holder({"metadata": {}, "spec": {"holderIdentity": "x"}}, NOW) is None  # never renewed


def test_claiming_creates_takes_over_or_renews() -> None:
    created = rem.claimed(None, NODE, "medik8s-leases", NOW)
    assert created["metadata"] == {"name": "node-worker-1", "namespace": "medik8s-leases",
                                   "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "Worker-1", "uid": "u1"}]}
    spec = created["spec"]
    assert spec["holderIdentity"] == rem.HOLDER_IDENTITY and spec["leaseDurationSeconds"] == 3600
    assert spec["acquireTime"] == spec["renewTime"] == stamp(0) and spec["leaseTransitions"] == 0
    taken = rem.claimed(a_lease("NodeHealthCheck", 4000, leaseTransitions=2, acquireTime=stamp(5000)), NODE, "medik8s-leases", NOW)
    assert taken["spec"]["leaseTransitions"] == 3 and taken["spec"]["acquireTime"] == stamp(0)
    assert taken["metadata"]["resourceVersion"] == "3"  # the update is a compare-and-swap
    renewed = rem.claimed(a_lease(rem.HOLDER_IDENTITY, 2000, leaseTransitions=1, acquireTime=stamp(2000)), NODE, "medik8s-leases", NOW)
    assert renewed["spec"]["renewTime"] == stamp(0) and renewed["spec"]["acquireTime"] == stamp(2000)
    assert renewed["spec"]["leaseTransitions"] == 1


def test_the_label_is_set_and_given_back_exactly_as_it_was() -> None:
    for before in (None, "true", "false"):
        labels = {} if before is None else {rem.EXCLUDE_LABEL: before}
        node = {**NODE, "metadata": {**NODE["metadata"], "labels": labels}}
        patch = rem.exclude(node, nodes.begin_patch(node, "nm"))
        assert patch["metadata"]["labels"] == {rem.EXCLUDE_LABEL: "true"}
        assert json.loads(patch["metadata"]["annotations"][rem.LABEL_BEFORE]) == before
        held = {**node, "metadata": {**node["metadata"], "labels": {rem.EXCLUDE_LABEL: "true"},
                                     "annotations": {**patch["metadata"]["annotations"]}}}
        # Again (an operator restarted): the record of the original state is kept.
        assert rem.LABEL_BEFORE not in rem.exclude(held, nodes.begin_patch(held, "nm"))["metadata"]["annotations"]
        end = rem.restore(held, nodes.end_patch(held))
        assert end["metadata"]["labels"] == {rem.EXCLUDE_LABEL: before} and end["metadata"]["annotations"][rem.LABEL_BEFORE] is None


def test_a_node_never_labelled_keeps_its_label_untouched() -> None:
    node = {**NODE, "metadata": {**NODE["metadata"], "labels": {rem.EXCLUDE_LABEL: "true"}}}
    assert "labels" not in rem.restore(node, nodes.end_patch(node))["metadata"]


def test_another_holder_keeps_the_node_untouched_and_says_who() -> None:
    node = {**NODE, "spec": {"unschedulable": False}}
    read = rem.LeaseView("medik8s-leases", "Worker-1", due=True, read=a_lease("NodeHealthCheck", 10))
    result = plan(Maintenance("nm", "Worker-1"), node, [], [], NOW, lease=read)
    assert result.phase == "Failed" and result.node_patch is None and not result.holds_node and result.recheck_in == 5
    assert result.lease_claim is None and result.lease_seen is not None and result.lease_seen.other == "NodeHealthCheck"
    assert "Lease medik8s-leases/node-worker-1 belongs to NodeHealthCheck" in result.status["lastError"]
    assert [(e.type, e.reason) for e in result.events] == [("Warning", "FailedMaintenance")]
    assert (rem.condition(result.lease_seen).status, rem.condition(result.lease_seen).reason) == ("False", "HeldByAnother")
    # Once the holder lets it expire, the plan claims it first, and takes nothing yet.
    freed = rem.LeaseView("medik8s-leases", "Worker-1", due=True, read=a_lease("NodeHealthCheck", 4000))
    claiming = plan(Maintenance("nm", "Worker-1", status=result.status), node, [], [], NOW, lease=freed)
    assert claiming.lease_claim is not None and not claiming.lease_claim.create and claiming.node_patch is None
    assert claiming.lease_claim.body["spec"]["holderIdentity"] == rem.HOLDER_IDENTITY
    # Once it is ours the node is taken, and labelled, and the status says the Lease is held.
    ours = rem.LeaseView("medik8s-leases", "Worker-1", known=rem.LeaseState("medik8s-leases", "Worker-1"))
    taken = plan(Maintenance("nm", "Worker-1", status=result.status), node, [], [], NOW, lease=ours)
    assert taken.phase == "Succeeded" and taken.node_patch["metadata"]["labels"] == {rem.EXCLUDE_LABEL: "true"}
    held = next(c for c in taken.status["conditions"] if c["type"] == rem.CONDITION)
    assert (held["status"], held["reason"]) == ("True", "Held")


def test_a_release_with_the_remediation_feature_grants_the_lease_rules_and_names_the_namespace(tmp_path: Path) -> None:
    """The CSV's RBAC and setting come from the one template, for the releases declaring the feature only."""
    doc = yaml.safe_load((ROOT / "releases.yaml").read_text())
    newest = doc["releases"][-1]
    newest["features"] = sorted(set(newest["features"]) | {"remediation"})
    (tmp_path / "releases.yaml").write_text(yaml.safe_dump(doc))

    def csv(version: str) -> dict:
        out = tmp_path / version
        assert cli.main(["bundle", "--root", str(tmp_path), "--release", version, "--out", str(out)]) == 0
        return yaml.safe_load((out / "bundle" / "manifests" / "node-maintenance-operator.clusterserviceversion.yaml").read_text())

    def rules_and_env(manifest: dict) -> tuple[list[dict], list[dict]]:
        install = manifest["spec"]["install"]["spec"]
        return install["clusterPermissions"][0]["rules"], install["deployments"][0]["spec"]["template"]["spec"]["containers"][0]["env"]

    rules, env = rules_and_env(csv(newest["version"]))
    assert {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update", "delete"]} in rules
    assert {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["create"]} in rules
    assert {"name": rem.LEASE_NAMESPACE_ENV, "value": rem.DEFAULT_LEASE_NAMESPACE} in env
    before, env_before = rules_and_env(csv(doc["releases"][0]["version"]))
    assert not any("leases" in r["resources"] or "namespaces" in r["resources"] for r in before)
    assert all(e["name"] != rem.LEASE_NAMESPACE_ENV for e in env_before)
