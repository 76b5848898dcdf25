"""A NodeMaintenance drains its node like `kubectl drain --ignore-daemonsets --delete-emptydir-data --force`."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess
from node_maintenance.runtime.drain_watches import LATE_PODS_SECONDS

from .helpers import (
    apply,
    create_nm,
    daemonset,
    delete_nm,
    deployment,
    eventually,
    evictions,
    get,
    nm,
    nm_status,
    node,
    our_taint,
    pdb,
    pinned,
    pod,
    pods_on,
    pods_running,
)

pytestmark = pytest.mark.e2e


def test_mixed_node_drains_to_daemonset_and_mirror_pods(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]]) -> None:
    target, spare = nodes(2)
    cluster.kubectl("cordon", spare)  # everything lands on the target first
    labels = {"app": "web"}
    ds_labels = {"app": "agent"}
    apply(
        cluster,
        deployment("web", namespace, [target, spare], 3, labels),
        pdb("web", namespace, labels, minAvailable=2),
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": namespace},
            "spec": {
                "serviceName": "db",
                "replicas": 1,
                "selector": {"matchLabels": {"app": "db"}},
                "template": {
                    "metadata": {"labels": {"app": "db"}},
                    "spec": {"terminationGracePeriodSeconds": 1, "affinity": pinned([target, spare]), "containers": [{"name": "c", "image": "registry.invalid/db:1"}]},
                },
            },
        },
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "batch", "namespace": namespace},
            "spec": {
                "template": {
                    "spec": {"restartPolicy": "Never", "nodeName": target, "containers": [{"name": "c", "image": "registry.invalid/job:1"}]}
                }
            },
        },
        daemonset("agent", namespace, [target], ds_labels),
        pod("bare", namespace, target),
        pod("scratch", namespace, target, spec={"volumes": [{"name": "tmp", "emptyDir": {}}]}),
        pod("mirror", namespace, target, annotations={"kubernetes.io/config.mirror": "static"}),
    )
    # 3 web + db + job + agent + bare + scratch + mirror; the Job's pod is Succeeded by then (KWOK completes Job pods).
    pods_running(cluster, namespace, 9)
    eventually(lambda: (get(cluster, "pdb", "web", "-n", namespace) or {}).get("status", {}).get("disruptionsAllowed") == 1, "PDB allows 1")
    assert any(p["status"]["phase"] == "Succeeded" for p in pods_on(cluster, target)), "the Job pod is a finished pod"
    cluster.kubectl("uncordon", spare)

    lowest: list[int] = []
    stop = threading.Event()

    def watch_budget() -> None:
        while not stop.is_set():
            status = (get(cluster, "pdb", "web", "-n", namespace) or {}).get("status", {})
            if "currentHealthy" in status:
                lowest.append(status["currentHealthy"] - status["desiredHealthy"])
            time.sleep(0.1)

    watcher = threading.Thread(target=watch_budget, daemon=True)
    watcher.start()
    try:
        create_nm(cluster, f"nm-{target}", target)
        eventually(lambda: nm_status(cluster, f"nm-{target}").get("phase") == "Succeeded", "maintenance Succeeded", timeout=90)
    finally:
        stop.set()
        watcher.join()
    status = nm_status(cluster, f"nm-{target}")
    left = sorted(p["metadata"]["name"] for p in pods_on(cluster, target))
    assert len(left) == 2 and "mirror" in left and any(name.startswith("agent-") for name in left), left
    assert status["totalpods"] == 9
    assert status["evictionPods"] == 7  # 3 web, db, job (finished), bare, scratch
    assert status["drainProgress"] == 100 and status["pendingPods"] == [] and status["lastError"] == ""
    assert {c["type"]: c["status"] for c in status["conditions"]}["Drained"] == "True"
    assert lowest and min(lowest) >= 0, f"the PDB went below its minimum: {min(lowest)}"
    target_node = node(cluster, target)
    assert target_node["spec"]["unschedulable"] is True and our_taint(target_node)
    # kopf wrote its finalizer and nothing else on the object: no diff base of its own, a patch per NodeMaintenance.
    annotations = ((nm(cluster, f"nm-{target}") or {}).get("metadata") or {}).get("annotations") or {}
    assert not [k for k in annotations if k.endswith("/last-handled-configuration")], annotations
    delete_nm(cluster, f"nm-{target}")


# The controllers that remove, on their own, the DaemonSet pods the side-by-side drains are to decide on: the
# garbage collector deletes a pod whose owner is gone, the DaemonSet controller a finished pod of its own.
CLEANERS = ("system:serviceaccount:kube-system:generic-garbage-collector", "system:serviceaccount:kube-system:daemon-set-controller")
KEPT = {"e2e.test/kept-from-controllers": "true"}


@contextmanager
def _kept_from_controllers(cluster: Cluster, namespace: str) -> Iterator[None]:
    """A ValidatingAdmissionPolicy refusing the CLEANERS' deletions of the pods labelled KEPT in ``namespace``, so
    such pods stay until a drain removes them (evictions and the operator's deletions are not theirs)."""
    name = f"kept-from-controllers-{namespace}"
    users = ", ".join(f"'{user}'" for user in CLEANERS)
    apply(cluster, {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
        "spec": {"failurePolicy": "Fail",
                 "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"], "resources": ["pods"]}]},
                 "validations": [{"expression": f"!(request.userInfo.username in [{users}])", "message": "kept for the drains under test"}]},
    }, {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                                    "objectSelector": {"matchLabels": KEPT}}},
    })
    try:
        yield
    finally:
        cluster.kubectl("delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", name, "--ignore-not-found")


def _role(pod_obj: dict[str, Any]) -> str:
    """What a pod stands for on its node: its controller's name (a DaemonSet's, one gone included), else its own."""
    return str(next((r["name"] for r in pod_obj["metadata"].get("ownerReferences") or [] if r.get("controller")), pod_obj["metadata"]["name"]))


def _roles(cluster: Cluster, node_name: str) -> dict[str, str]:
    """The uid of each pod on the node, by its role."""
    return {_role(p): p["metadata"]["uid"] for p in pods_on(cluster, node_name)}


def test_daemonset_pods_go_as_with_kubectl_drain_side_by_side(cluster: Cluster, operator: OperatorProcess, namespace: str,
                                                               nodes: Callable[..., list[str]]) -> None:
    """Two nodes alike, one drained by `kubectl drain --ignore-daemonsets --delete-emptydir-data --force`, the other
    by a NodeMaintenance: both remove the finished DaemonSet pods (Succeeded, Failed) and the pod whose DaemonSet
    is gone, and both leave the running pod of a DaemonSet that exists."""
    by_kubectl, by_operator = pair = nodes(2)
    with _kept_from_controllers(cluster, namespace):
        apply(cluster, *(daemonset(name, namespace, pair, {"app": name, **KEPT}) for name in ("agent", "spent-ok", "spent-failed")))
        eventually(lambda: all(_roles(cluster, n).keys() >= {"agent", "spent-ok", "spent-failed"} for n in pair), "a pod of each DaemonSet on both nodes")
        probe = next(p for p in pods_on(cluster, by_kubectl) if p["metadata"]["name"].startswith("agent-"))["metadata"]["name"]

        def policy_holds() -> bool:
            attempt = cluster.kubectl("delete", "pod", probe, "-n", namespace, "--dry-run=server", f"--as={CLEANERS[0]}", check=False)
            return attempt.returncode != 0 and "kept for the drains under test" in attempt.stderr

        eventually(policy_holds, "the garbage collector's deletions refused")
        gone = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "gone", "uid": str(uuid.uuid4()), "controller": True}
        apply(cluster, *(pod(f"orphan-{n}", namespace, n, labels=KEPT, ownerReferences=[gone]) for n in pair))
        for node_name in pair:
            for p in pods_on(cluster, node_name):
                phase = {"spent-ok": "Succeeded", "spent-failed": "Failed"}.get(p["metadata"].get("labels", {}).get("app", ""))
                if phase:
                    cluster.kubectl("patch", "pod", p["metadata"]["name"], "-n", namespace, "--subresource=status", "--type=merge",
                                    "-p", json.dumps({"status": {"phase": phase}}))
        expected = {"agent": "Running", "spent-ok": "Succeeded", "spent-failed": "Failed", "gone": "Running"}
        eventually(lambda: all({_role(p): p["status"].get("phase") for p in pods_on(cluster, n)} == expected for n in pair),
                   "both nodes alike: a running DaemonSet pod, two finished ones and an orphan")
        before = {n: _roles(cluster, n) for n in pair}

        name = f"nm-{by_operator}"
        create_nm(cluster, name, by_operator)
        drained = cluster.kubectl("drain", by_kubectl, "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--timeout=90s")
        # kubectl evicts the orphan (its warning about the missing DaemonSet is overwritten by its later filters).
        assert f"pod/orphan-{by_kubectl} evicted" in drained.stdout, drained.stdout
        eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", "maintenance Succeeded", timeout=90)
        removed = {n: {role for role, uid in before[n].items() if uid not in _roles(cluster, n).values()} for n in pair}
        assert removed[by_operator] == removed[by_kubectl] == {"spent-ok", "spent-failed", "gone"}, removed
        status = nm_status(cluster, name)
        assert status["totalpods"] == 4 and status["evictionPods"] == 3 and status["pendingPods"] == []
        delete_nm(cluster, name)


def test_blocking_pdb_keeps_running_and_sends_nothing_the_budget_refuses(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]]) -> None:
    """While the budget allows no disruption the operator waits on it (no eviction, no retry loop), says
    why, and evicts once the budget relaxes."""
    target, spare = nodes(2)
    labels = {"app": "guarded"}
    cluster.kubectl("cordon", spare)
    apply(cluster, deployment("guarded", namespace, [target, spare], 2, labels), pdb("guarded", namespace, labels, minAvailable=2))
    pods_running(cluster, namespace, 2)
    eventually(lambda: (get(cluster, "pdb", "guarded", "-n", namespace) or {}).get("status", {}).get("currentHealthy") == 2, "PDB sees 2 healthy")
    name = f"nm-{target}"
    create_nm(cluster, name, target)

    def blocked() -> str:
        error = nm_status(cluster, name).get("lastError", "")
        return error if f"{namespace}/guarded" in error else ""

    error = eventually(blocked, "lastError naming the PDB")
    assert nm_status(cluster, name)["phase"] == "Running"
    assert error.count("waits on PodDisruptionBudget") == 2 and "guarded-" in error
    time.sleep(12)  # observe a fixed window while the budget allows nothing
    attempts = evictions(cluster, namespace)
    assert len(attempts) <= 2, f"evictions sent to a budget that allows none: {len(attempts)}"
    assert nm_status(cluster, name)["phase"] == "Running"
    cluster.kubectl("uncordon", spare)
    cluster.kubectl("patch", "pdb", "guarded", "-n", namespace, "--type=merge", "-p", '{"spec":{"minAvailable":1}}')
    eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", "maintenance Succeeded once the PDB relaxes", timeout=90)
    assert nm_status(cluster, name)["lastError"] == ""
    delete_nm(cluster, name)


def test_pod_selector_limits_the_drain(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]]) -> None:
    (target,) = nodes(1)
    apply(
        cluster,
        pod("chosen-1", namespace, target, labels={"drain": "yes"}),
        pod("chosen-2", namespace, target, labels={"drain": "yes"}),
        pod("other", namespace, target, labels={"drain": "no"}),
    )
    pods_running(cluster, namespace, 3)
    name = f"nm-{target}"
    create_nm(cluster, name, target, podSelector={"matchLabels": {"drain": "yes"}})
    eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", "maintenance Succeeded")
    assert [p["metadata"]["name"] for p in pods_on(cluster, target)] == ["other"]
    status = nm_status(cluster, name)
    assert status["evictionPods"] == 2 and status["totalpods"] == 3
    delete_nm(cluster, name)


def test_grace_period_override_reaches_the_eviction(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]]) -> None:
    (target,) = nodes(1)
    # A finalizer holds the pod after eviction so its deletion grace period can be read.
    apply(cluster, pod("slow", namespace, target, finalizers=["e2e.test/hold"], spec={"terminationGracePeriodSeconds": 120}))
    pods_running(cluster, namespace, 1)
    name = f"nm-{target}"
    create_nm(cluster, name, target, gracePeriodSeconds=3)
    terminating = eventually(
        lambda: (obj := get(cluster, "pod", "slow", "-n", namespace)) and obj["metadata"].get("deletionTimestamp") and obj,
        "the pod is being deleted",
    )
    assert terminating["metadata"]["deletionGracePeriodSeconds"] == 3
    cluster.kubectl("patch", "pod", "slow", "-n", namespace, "--type=json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')
    eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", "maintenance Succeeded")
    delete_nm(cluster, name)


def test_timeout_fails_and_stops_evicting(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]]) -> None:
    (target,) = nodes(1)
    labels = {"app": "stuck"}
    apply(cluster, pod("stuck", namespace, target, labels=labels), pdb("stuck", namespace, labels, minAvailable=1))
    pods_running(cluster, namespace, 1)
    eventually(lambda: (get(cluster, "pdb", "stuck", "-n", namespace) or {}).get("status", {}).get("currentHealthy") == 1, "PDB sees the pod")
    name = f"nm-{target}"
    create_nm(cluster, name, target, timeoutSeconds=4)
    eventually(lambda: nm_status(cluster, name).get("phase") == "Failed", "maintenance Failed after its timeout", timeout=30)
    status = nm_status(cluster, name)
    assert f"{namespace}/stuck" in status["lastError"] and "timed out" in status["lastError"]
    assert status["pendingPods"] == ["stuck"]
    attempts = len(evictions(cluster, namespace))
    time.sleep(7)
    assert len(evictions(cluster, namespace)) == attempts, "evictions went on after the timeout"
    still = node(cluster, target)
    assert still["spec"]["unschedulable"] is True and our_taint(still)
    delete_nm(cluster, name)


@pytest.mark.parametrize(("cordoned_before", "tainted_before"), [(False, False), (True, False), (False, True)])
def test_delete_restores_the_node_exactly(cluster: Cluster, operator: OperatorProcess, nodes: Callable[..., list[str]], cordoned_before: bool, tainted_before: bool) -> None:
    other_taint = {"key": "example.com/dedicated", "value": "infra", "effect": "NoSchedule"}
    drain_taint = [{"key": "kubevirt.io/drain", "effect": "NoSchedule"}] if tainted_before else []
    (target,) = nodes(1, labels={"example.com/pool": "infra"}, taints=[other_taint, *drain_taint], unschedulable=cordoned_before)
    before = node(cluster, target)
    name = f"nm-{target}"
    create_nm(cluster, name, target)
    eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", "maintenance Succeeded")
    during = node(cluster, target)
    assert during["spec"]["unschedulable"] is True and our_taint(during)
    delete_nm(cluster, name)
    after = node(cluster, target)
    assert bool(after["spec"].get("unschedulable")) is cordoned_before
    assert our_taint(after) is tainted_before  # a drain taint someone else put there stays
    assert [t for t in after["spec"].get("taints") or [] if t["key"] == other_taint["key"]] == [other_taint]
    # Every label the node had is still there unchanged (controllers may add their own meanwhile).
    assert before["metadata"]["labels"].items() <= after["metadata"]["labels"].items()
    assert not any(k.startswith("nodemaintenance.kubevirt.io/") for k in after["metadata"].get("annotations") or {})


def test_pods_arriving_later_are_drained_too(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]]) -> None:
    (target,) = nodes(1)
    name = f"nm-{target}"
    create_nm(cluster, name, target)
    eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", "empty node drained")
    tolerant = {"tolerations": [{"key": "kubevirt.io/drain", "operator": "Exists"}, {"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]}
    apply(cluster, pod("late", namespace, target, spec=tolerant))
    # A drained node's pods are listed again every LATE_PODS_SECONDS, not watched.
    eventually(lambda: not any(p["metadata"]["name"] == "late" for p in pods_on(cluster, target)), "the late pod is evicted",
               timeout=LATE_PODS_SECONDS + 30)
    delete_nm(cluster, name)
