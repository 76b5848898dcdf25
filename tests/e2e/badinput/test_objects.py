"""NodeMaintenance objects at and past their schema's limits, in any script, without a status and with a
status someone else wrote: refused by the API server naming the field, or carried out with a clear status."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from devcluster.cluster import KWOK_SELECTOR, Cluster
from devcluster.operator import OperatorProcess
from node_maintenance.api import GROUP, KIND, PLURAL

from ..helpers import NM, apply, create_nm, delete_nm, eventually, existing, nm_status, our_taint, pod, pods_on
from ..helpers import node as node_of
from .operator_log import errors_about

pytestmark = pytest.mark.e2e
INT64_MAX = 2**63 - 1


def _nm(name: str, spec: object, version: str = "v1beta1") -> dict[str, Any]:
    obj = {"apiVersion": f"{GROUP}/{version}", "kind": KIND, "metadata": {"name": name}, "spec": spec}
    return obj if spec is not None else {k: v for k, v in obj.items() if k != "spec"}


def _spec(**fields: object) -> dict[str, Any]:
    return {"nodeName": "some-node", "reason": "limits", **fields}


REFUSED: list[tuple[str, object, str, tuple[str, ...]]] = [
    # (what, spec, version, words the API server's refusal must hold)
    ("nodeName of 254 characters", _spec(nodeName="a" * 254), "v1beta1", ("spec.nodeName", "Too long", "253")),
    ("nodeName with capitals", _spec(nodeName="Worker-1"), "v1beta1", ("spec.nodeName", "should match")),
    ("nodeName in another script", _spec(nodeName="nœud-ü"), "v1beta1", ("spec.nodeName", "should match")),
    ("nodeName empty", _spec(nodeName=""), "v1beta1", ("spec.nodeName", "should match")),
    ("nodeName with a trailing dot", _spec(nodeName="node."), "v1beta1", ("spec.nodeName", "should match")),
    ("nodeName a number", _spec(nodeName=7), "v1beta1", ("spec.nodeName", "must be of type string")),
    ("nodeName missing", {"reason": "x"}, "v1beta1", ("spec.nodeName", "Required value")),
    ("nodeName missing in v1alpha1", {"reason": "x"}, "v1alpha1", ("spec.nodeName", "Required value")),
    ("reason of 1025 characters", _spec(reason="r" * 1025), "v1beta1", ("spec.reason", "Too long", "1024")),
    ("reason of 1025 emoji", _spec(reason="\U0001F6E0" * 1025), "v1beta1", ("spec.reason", "Too long")),
    ("reason an object", _spec(reason={"why": "x"}), "v1beta1", ("spec.reason",)),
    ("spec missing", None, "v1beta1", ("spec", "Required value")),
    ("spec a string", "maintenance please", "v1beta1", ("spec", "must be of type object")),
    ("drain a list", _spec(drain=[1]), "v1beta1", ("spec.drain", "must be of type object")),
    ("gracePeriodSeconds -1", _spec(drain={"gracePeriodSeconds": -1}), "v1beta1", ("spec.drain.gracePeriodSeconds", "greater than or equal to 0")),
    ("gracePeriodSeconds 1.5", _spec(drain={"gracePeriodSeconds": 1.5}), "v1beta1", ("spec.drain.gracePeriodSeconds", "integer")),
    ("gracePeriodSeconds a string", _spec(drain={"gracePeriodSeconds": "30"}), "v1beta1", ("spec.drain.gracePeriodSeconds", "integer")),
    ("timeoutSeconds -1", _spec(drain={"timeoutSeconds": -1}), "v1beta1", ("spec.drain.timeoutSeconds", "greater than or equal to 0")),
    ("timeoutSeconds past int64", _spec(drain={"timeoutSeconds": 2**64}), "v1beta1", ("timeoutSeconds",)),
    ("selector operator unknown", _spec(drain={"podSelector": {"matchExpressions": [{"key": "a", "operator": "Like"}]}}), "v1beta1",
     ("spec.drain.podSelector.matchExpressions[0].operator", "Unsupported value")),
    ("selector In without values", _spec(drain={"podSelector": {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}}), "v1beta1",
     ("spec.drain.podSelector.matchExpressions[0]", "In and NotIn need at least one value")),
    ("selector Exists with values", _spec(drain={"podSelector": {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}}),
     "v1beta1", ("spec.drain.podSelector.matchExpressions[0]", "Exists and DoesNotExist take none")),
    ("selector expression without key", _spec(drain={"podSelector": {"matchExpressions": [{"operator": "Exists"}]}}), "v1beta1",
     ("spec.drain.podSelector.matchExpressions[0].key", "Required value")),
    ("selector label value a number", _spec(drain={"podSelector": {"matchLabels": {"a": 1}}}), "v1beta1",
     ("spec.drain.podSelector.matchLabels.a", "must be of type string")),
]


@pytest.mark.parametrize("what,spec,version,words", REFUSED, ids=[r[0] for r in REFUSED])
def test_past_its_limits_the_api_server_refuses_naming_the_field(cluster: Cluster, crd: str, tally: Counter[str],
                                                                 what: str, spec: object, version: str, words: tuple[str, ...]) -> None:
    tally["objects: fields past their limits"] += 1
    result = cluster.kubectl("create", "-f", "-", input=json.dumps(_nm(f"past-{uuid.uuid4().hex[:8]}", spec, version)), check=False)
    assert result.returncode != 0, f"{what}: accepted"
    assert all(word in result.stderr for word in words), f"{what}: {result.stderr}"


def test_a_name_of_254_characters_is_refused(cluster: Cluster, crd: str, tally: Counter[str]) -> None:
    tally["objects: fields past their limits"] += 1
    result = cluster.kubectl("create", "-f", "-", input=json.dumps(_nm("n" * 254, _spec())), check=False)
    assert result.returncode != 0 and "metadata.name" in result.stderr and "253" in result.stderr, result.stderr


@pytest.mark.parametrize("status,words", [
    ({"phase": "Exploded"}, ("status.phase", "Unsupported value")),
    ({"drainProgress": 101}, ("status.drainProgress", "less than or equal to 100")),
    ({"conditions": [{"type": "Drained", "status": "Maybe", "reason": "x", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}]},
     ("status.conditions[0].status", "Unsupported value")),
    ({"lastUpdate": "yesterday"}, ("status.lastUpdate", "date-time")),
], ids=["phase", "progress", "condition", "timestamp"])
def test_a_status_past_its_limits_is_refused(cluster: Cluster, operator: OperatorProcess, tally: Counter[str], status: dict[str, Any],
                                             words: tuple[str, ...]) -> None:
    tally["objects: status fields past their limits"] += 1
    name = f"st-{uuid.uuid4().hex[:8]}"
    create_nm(cluster, name, f"absent-{name}")
    try:
        result = cluster.kubectl("patch", NM, name, "--subresource=status", "--type=merge", "-p", json.dumps({"status": status}), check=False)
        assert result.returncode != 0 and all(w in result.stderr for w in words), result.stderr
    finally:
        delete_nm(cluster, name)


def _long_named_node(cluster: Cluster) -> str:
    """A KWOK node whose name has the most characters a node name may have (no hostname label: 63 at most)."""
    name = ".".join(["n" + uuid.uuid4().hex[:8] + "x" * 53] + ["y" * 62] * 2 + ["z" * (253 - 63 - 2 * 63)])
    assert len(name) == 253
    key, value = KWOK_SELECTOR
    apply(cluster, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": {key: value}, "labels": {"type": "kwok"}},
                    "spec": {"taints": []}})
    cluster.wait_node_ready(name)
    return name


def test_fields_at_their_limits_and_in_any_script_are_carried_out(cluster: Cluster, operator: OperatorProcess, namespace: str,
                                                                  tally: Counter[str]) -> None:
    """A node name of 253 characters, a reason of 1024 characters in several scripts (control characters
    included), the largest grace period and timeout: the node is drained and given back, the reason kept."""
    target = _long_named_node(cluster)
    reason = ("maintenance \u202eRTL\u202c ñ 维护 \u0000\u0007 e\u0301 " + "\U0001F6E0" * 1024)[:1024]
    name = "n" * 253
    apply(cluster, pod("p", namespace, target))
    eventually(lambda: any(p["status"].get("phase") == "Running" for p in pods_on(cluster, target)), "the pod running")
    tally["objects: fields at their limits, any script"] += 4
    apply(cluster, _nm(name, {"nodeName": target, "reason": reason, "drain": {"timeoutSeconds": INT64_MAX, "gracePeriodSeconds": 0}}))
    try:
        status = eventually(lambda: (s := nm_status(cluster, name)).get("phase") == "Succeeded" and s,
                            f"drained (operator errors: {errors_about(operator, name)[-1:]})", timeout=60)
        assert not errors_about(operator, name)
        assert status["evictionPods"] == 1 and status["drainProgress"] == 100
        assert existing(cluster, NM, name)["spec"]["reason"] == reason
        drained = node_of(cluster, target)
        assert drained["spec"].get("unschedulable") and our_taint(drained)
    finally:
        delete_nm(cluster, name)
        cluster.kubectl("delete", "node", target, "--wait=false")
    released = node_of(cluster, target) if cluster.kubectl("get", "node", target, check=False).returncode == 0 else None
    assert released is None or not our_taint(released)


def test_the_largest_grace_period_is_passed_on_and_the_drain_still_ends(cluster: Cluster, operator: OperatorProcess, namespace: str,
                                                                        nodes: Callable[..., list[str]], tally: Counter[str]) -> None:
    (target,) = nodes(1)
    apply(cluster, pod("slow", namespace, target))
    eventually(lambda: any(p["status"].get("phase") == "Running" for p in pods_on(cluster, target)), "the pod running")
    tally["objects: fields at their limits, any script"] += 1
    name = f"nm-{target}"
    create_nm(cluster, name, target, gracePeriodSeconds=INT64_MAX)
    try:
        # The pod is evicted (the API server caps the grace it grants); the maintenance reports it, never an error.
        eventually(lambda: (s := nm_status(cluster, name)).get("phase") in ("Running", "Succeeded") and not s.get("lastError"),
                   "a drain without errors", timeout=30)
        eventually(lambda: [p for p in pods_on(cluster, target) if p["metadata"].get("deletionTimestamp")] or not pods_on(cluster, target),
                   "the pod evicted", timeout=30)
        assert not errors_about(operator, name)
    finally:
        cluster.kubectl("delete", "pod", "slow", "-n", namespace, "--grace-period=0", "--force", check=False)
        delete_nm(cluster, name)


def test_a_status_someone_else_writes_is_put_right(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]],
                                                   tally: Counter[str]) -> None:
    """A user (or another controller) writes the status: the operator is not misled, and writes the truth again."""
    (target,) = nodes(1)
    apply(cluster, pod("held", namespace, target, finalizers=["e2e.test/hold"]))
    eventually(lambda: any(p["status"].get("phase") == "Running" for p in pods_on(cluster, target)), "the pod running")
    name = f"nm-{target}"
    create_nm(cluster, name, target, timeoutSeconds=3600)
    try:
        truth = eventually(lambda: (s := nm_status(cluster, name)).get("phase") == "Running" and "held" in s.get("pendingPods", []) and s,
                           "draining, the held pod pending")
        lies = [
            {"phase": "Succeeded", "drainProgress": 100, "pendingPods": [], "pendingPodsRefs": [], "lastError": ""},
            {"phase": "Failed", "lastError": "written by someone else", "drainStartTime": "2000-01-01T00:00:00Z"},
            {"totalpods": 999, "evictionPods": 999},
        ]
        for lie in lies:
            tally["objects: status written by someone else"] += 1
            cluster.kubectl("patch", NM, name, "--subresource=status", "--type=merge", "-p", json.dumps({"status": lie}))
            eventually(lambda: all((s := nm_status(cluster, name)).get(k) == truth.get(k)
                                   for k in ("phase", "pendingPods", "totalpods", "evictionPods", "drainStartTime"))
                       and "someone else" not in s.get("lastError", ""), f"the truth restored after {lie}", timeout=20)
        tally["objects: status written by someone else"] += 1
        cluster.kubectl("patch", NM, name, "--subresource=status", "--type=json", "-p", '[{"op": "remove", "path": "/status"}]')
        eventually(lambda: nm_status(cluster, name).get("phase") == "Running", "a removed status written again", timeout=20)
        # Not misled: the held pod still pends; the node is still the maintenance's.
        assert "held" in nm_status(cluster, name)["pendingPods"]
        assert node_of(cluster, target)["spec"].get("unschedulable")
    finally:
        cluster.kubectl("patch", "pod", "held", "-n", namespace, "--type=json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]', check=False)
        delete_nm(cluster, name)
    assert not node_of(cluster, target)["spec"].get("unschedulable")


def test_no_update_in_any_version_moves_a_maintenance(cluster: Cluster, operator: OperatorProcess, nodes: Callable[..., list[str]], tally: Counter[str]) -> None:
    """No update moves a maintenance to another node, in any version: nodeName changed, spec or nodeName removed."""
    (target,) = nodes(1)
    name = f"nm-{target}"
    create_nm(cluster, name, target)
    eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", "drained")
    for version in ("v1beta1", "v1alpha1"):
        tally["objects: spec removed or node changed on update"] += 1
        changed = cluster.kubectl("patch", f"{PLURAL}.{version}.{GROUP}", name, "--type=merge", "-p", json.dumps({"spec": {"nodeName": "other-node"}}),
                                  check=False)
        assert changed.returncode != 0 and "spec.nodeName" in changed.stderr and "immutable" in changed.stderr, (version, changed.stdout, changed.stderr)
    for version, patch in (("v1beta1", "/spec"), ("v1alpha1", "/spec"), ("v1alpha3", "/spec"), ("v1alpha3", "/spec/nodeName")):
        tally["objects: spec removed or node changed on update"] += 1
        removed = cluster.kubectl("patch", f"{PLURAL}.{version}.{GROUP}", name, "--type=json", "-p", json.dumps([{"op": "remove", "path": patch}]),
                                  check=False)
        assert removed.returncode != 0 and "spec" in removed.stderr, (version, patch, removed.stdout, removed.stderr)
    assert existing(cluster, NM, name)["spec"]["nodeName"] == target
    cluster.kubectl("delete", NM, name, "--timeout=30s")
    eventually(lambda: not node_of(cluster, target)["spec"].get("unschedulable"), "the node given back")
