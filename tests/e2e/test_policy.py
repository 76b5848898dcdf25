"""NodeMaintenancePolicy end to end: slots and the queue, hook Jobs, drain rules, conflicts.

Hook Jobs: KWOK completes every Job pod it runs with success at once (its stock pod-complete stage),
and it has no stage that fails one, so the test could not see a Job still running nor make one fail.
Hook Jobs here therefore run on a node KWOK does not manage (``hook_runner``), where the test plays the
kubelet: it writes each pod's status (Succeeded with exit code 0, or Failed with exit code 1) through
the status subresource, as a kubelet reports a container's end. The Job controller then does the rest,
a retry by backoffLimit included.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess
from node_maintenance.coordination import remediation
from node_maintenance_packaging.clusterserviceversion import NAMESPACE as OPERATOR_NAMESPACE

from .helpers import (
    NM,
    NMP,
    RESTRICTED_CONTAINER,
    RESTRICTED_POD,
    BackgroundWatch,
    CordonWatch,
    a_pool,
    apply,
    condition,
    create_nm,
    eventually,
    existing,
    foreign_lease,
    get,
    nm,
    nm_status,
    pod,
    pods_on,
    policy_status,
)

pytestmark = pytest.mark.e2e


@pytest.fixture
def hook_runner(cluster: Cluster) -> Iterator[str]:
    """A node no kubelet (and no KWOK) runs: the test reports its pods' ends itself."""
    name = f"hooks-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"role": "hook-runner"}}}))
    yield name
    cluster.kubectl("delete", "node", name, "--wait=false", "--ignore-not-found", check=False)


def test_ten_maintenances_under_max_parallel_two_take_turns_in_creation_order(cluster: Cluster, operator: OperatorProcess, nodes: Callable[..., list[str]], policies: Callable[..., str]) -> None:
    pool = a_pool()
    workers = nodes(10, labels=pool)
    policy = policies(pool, maxParallel=2)
    names = [f"roll-{i:02d}-{workers[i]}" for i in range(10)]
    with CordonWatch(cluster, pool) as watch:
        for name, worker in zip(names, workers, strict=True):
            create_nm(cluster, name, worker)
        # Two take their node; the other eight wait in line, in creation order, and their nodes are untouched.
        for name in names[2:]:
            status = eventually(lambda: (s := nm_status(cluster, name)).get("phase") == "Pending" and s, f"{name} Pending")
            queued = condition(status, "Queued")
            assert queued["status"] == "True" and queued["reason"] == "WaitingForSlot", queued
            assert f"NodeMaintenancePolicy {policy}" in queued["message"], queued
        eventually(lambda: all(nm_status(cluster, n).get("phase") == "Succeeded" for n in names[:2]), "the first two drained")
        assert eventually(lambda: policy_status(cluster, policy).get("queue") == names[2:] and policy_status(cluster, policy),
                          "the policy's queue")["inMaintenance"] == 2

        # Deleting a waiting one frees no slot and touches nothing: still two in maintenance, one fewer in line.
        cluster.kubectl("delete", NM, names[6], "--timeout=60s")
        time.sleep(2)
        assert watch.cordoned == set(workers[:2])
        status = eventually(lambda: (s := policy_status(cluster, policy)).get("queued") == 7 and s, "the queue without the deleted one")
        assert status["inMaintenance"] == 2
        untouched = existing(cluster, "node", workers[6])
        assert not untouched["spec"].get("unschedulable") and not (untouched["metadata"].get("annotations") or {}).get("nodemaintenance.kubevirt.io/holder")
        remaining = [n for i, n in enumerate(names) if i != 6]

        # The admin works through the line, handing back each node once drained (a deletion ends once its node is given
        # back); the next in line takes the freed slot before the admin frees the other one.
        for i, name in enumerate(remaining):
            eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", f"{name} drained", timeout=60)
            cluster.kubectl("delete", NM, name, "--timeout=60s")
            if i + 2 < len(remaining):
                after = remaining[i + 2]
                eventually(lambda: nm_status(cluster, after).get("phase") in ("Running", "Succeeded"), f"{after} took the freed slot")
        eventually(lambda: not watch.cordoned, "every node handed back")
    in_line = [w for i, w in enumerate(workers) if i != 6]
    # The first two were admitted together, a creation apart: which of them was cordoned first is a race of their
    # drains. Every later one took a slot freed after the one before it had taken its own.
    assert set(watch.order[:2]) == set(in_line[:2]) and watch.order[2:] == in_line[2:], "nodes were taken out of creation order"
    assert watch.released == in_line, "nodes were handed back out of creation order"
    assert watch.most == 2, f"{watch.most} nodes were cordoned at once under maxParallel: 2"


def test_a_maintenance_refused_at_takeover_gives_its_slot_to_the_next_in_line(cluster: Cluster, operator: OperatorProcess, nodes: Callable[..., list[str]], policies: Callable[..., str],
                                                                           lease_namespace: str) -> None:
    pool = a_pool()
    held, free = nodes(2, labels=pool)
    apply(cluster, foreign_lease(held, 3600))  # remediation holds the first node's Lease
    policies(pool, maxParallel=1)
    first, second = f"a-{held}", f"b-{free}"  # created in this order (names break a tie of creation seconds)
    with CordonWatch(cluster, pool) as watch:
        create_nm(cluster, first, held)
        create_nm(cluster, second, free)
        # The first got the slot and could not take its node: it gives the slot back, and the second drains.
        eventually(lambda: nm_status(cluster, second).get("phase") == "Succeeded", "the next in line drained")
        status = nm_status(cluster, first)
        queued = condition(status, "Queued")
        assert (queued["status"], queued["reason"]) == ("True", "SlotGivenBack"), queued
        assert status["phase"] == "Failed" and "belongs to NodeHealthCheck" in status["lastError"], status
        # The Lease released, the first rejoins the line; it waits while the second holds the only slot.
        cluster.kubectl("delete", "lease", remediation.lease_name(held), "-n", lease_namespace)
        eventually(lambda: condition(nm_status(cluster, first), "Queued").get("reason") == "WaitingForSlot", "back in line")
        assert watch.cordoned == {free}
        cluster.kubectl("delete", NM, second, "--timeout=60s")
        eventually(lambda: nm_status(cluster, first).get("phase") == "Succeeded", "the first drained once the slot is free")
        assert watch.cordoned == {held}
        cluster.kubectl("delete", NM, first, "--timeout=60s")
    assert watch.order == [free, held] and watch.most == 1, (watch.order, watch.most)


def _job_template(runner: str, backoff_limit: int, namespace: str) -> dict[str, Any]:
    """A hook whose Job runs in the test's ``namespace`` (never the operator's), its pod meeting the `restricted` Pod
    Security Standard."""
    return {"namespace": namespace, "jobTemplate": {"spec": {"backoffLimit": backoff_limit, "template": {"spec": {
        "nodeName": runner, "restartPolicy": "Never",
        "securityContext": RESTRICTED_POD,
        "containers": [{"name": "hook", "image": "registry.invalid/hook:1", "command": ["hook", "$(NODE_NAME)"],
                        "securityContext": RESTRICTED_CONTAINER}],
    }}}}}


def _hook_pods(cluster: Cluster, hook: str, namespace: str) -> list[dict[str, Any]]:
    listing = get(cluster, "pods", "-n", namespace, "-l", "job-name") or {"items": []}
    return [p for p in listing["items"] if p["metadata"]["labels"]["job-name"].startswith(f"nm-{hook}-")]


def _finish(cluster: Cluster, hook_pod: dict[str, Any], exit_code: int) -> None:
    """Report the pod's container as ended, as its kubelet would."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {"phase": "Succeeded" if exit_code == 0 else "Failed", "containerStatuses": [{
        "name": "hook", "image": "registry.invalid/hook:1", "imageID": "", "ready": False, "restartCount": 0,
        "state": {"terminated": {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error", "startedAt": now, "finishedAt": now}},
    }]}
    cluster.kubectl("patch", "pod", hook_pod["metadata"]["name"], "-n", hook_pod["metadata"]["namespace"], "--subresource=status", "--type=merge",
                    "-p", json.dumps({"status": status}))


def _one_hook_pod(cluster: Cluster, hook: str, node_name: str, namespace: str, *, count: int = 1) -> dict[str, Any]:
    def running() -> dict[str, Any] | None:
        pods = [p for p in _hook_pods(cluster, hook, namespace) if p["status"].get("phase") == "Pending"]
        everything = _hook_pods(cluster, hook, namespace)
        return pods[0] if pods and len(everything) == count else None

    hook_pod = eventually(running, f"{hook} pod #{count}")
    env = {e["name"]: e.get("value") for e in hook_pod["spec"]["containers"][0]["env"]}
    assert env["NODE_NAME"] == node_name
    return hook_pod


def test_pre_drain_and_post_maintenance_jobs_gate_the_drain_and_the_handback(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]],
                                                                           policies: Callable[..., str], hook_runner: str) -> None:
    pool = a_pool()
    (worker,) = nodes(1, labels=pool)
    policies(pool, preDrain=_job_template(hook_runner, 0, namespace), postMaintenance=_job_template(hook_runner, 0, namespace))
    apply(cluster, pod("app", namespace, worker))
    eventually(lambda: any(p["status"].get("phase") == "Running" for p in pods_on(cluster, worker)), "the app pod running")
    name = f"hooks-{worker}"
    create_nm(cluster, name, worker)

    # The node is taken, the preDrain Job runs, and nothing is evicted while it does.
    pre = _one_hook_pod(cluster, "pre-drain", worker, namespace)
    assert _hook_pods(cluster, "pre-drain", OPERATOR_NAMESPACE) == [], "a hook Job ran in the operator's namespace"
    status = eventually(lambda: (s := nm_status(cluster, name)).get("phase") == "Running" and condition(s, "PreDrain") and s, "PreDrain reported")
    assert condition(status, "PreDrain")["reason"] == "JobRunning" and "preDrain Job" in status["lastError"]
    assert existing(cluster, "node", worker)["spec"].get("unschedulable")
    time.sleep(2)
    assert [p["metadata"]["name"] for p in pods_on(cluster, worker)] == ["app"]
    assert not pods_on(cluster, worker)[0]["metadata"].get("deletionTimestamp"), "a pod was evicted before preDrain succeeded"

    _finish(cluster, pre, 0)
    status = eventually(lambda: (s := nm_status(cluster, name)).get("phase") == "Succeeded" and s, "drained once preDrain succeeded")
    assert condition(status, "PreDrain")["status"] == "True" and not pods_on(cluster, worker)

    # Deleting the maintenance runs postMaintenance; the node stays cordoned until it succeeds.
    cluster.kubectl("delete", NM, name, "--wait=false")
    post = _one_hook_pod(cluster, "post-maintenance", worker, namespace)
    time.sleep(2)
    assert existing(cluster, "node", worker)["spec"].get("unschedulable"), "handed back before postMaintenance succeeded"
    assert condition(nm_status(cluster, name), "PostMaintenance")["reason"] == "JobRunning"
    _finish(cluster, post, 0)
    eventually(lambda: nm(cluster, name) is None, "the maintenance gone once postMaintenance succeeded", timeout=60)
    assert not existing(cluster, "node", worker)["spec"].get("unschedulable")


def test_failed_hook_jobs_are_retried_by_their_backoff_limit_then_reported(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]],
                                                                           policies: Callable[..., str], hook_runner: str) -> None:
    pool = a_pool()
    (worker,) = nodes(1, labels=pool)
    policies(pool, preDrain=_job_template(hook_runner, 1, namespace), postMaintenance=_job_template(hook_runner, 0, namespace))
    apply(cluster, pod("app", namespace, worker))
    eventually(lambda: any(p["status"].get("phase") == "Running" for p in pods_on(cluster, worker)), "the app pod running")
    name = f"fails-{worker}"
    create_nm(cluster, name, worker)

    _finish(cluster, _one_hook_pod(cluster, "pre-drain", worker, namespace), 1)
    # backoffLimit: 1 — the Job controller runs a second pod; only when that fails too does the Job fail.
    status = eventually(lambda: "1 failed pod(s) so far" in (s := nm_status(cluster, name)).get("lastError", "") and s, "the retry reported")
    assert status["phase"] == "Running"
    _finish(cluster, _one_hook_pod(cluster, "pre-drain", worker, namespace, count=2), 1)
    status = eventually(lambda: (s := nm_status(cluster, name)).get("phase") == "Failed" and s, "Failed once the Job failed", timeout=60)
    assert condition(status, "PreDrain")["reason"] == "JobFailed"
    assert "BackoffLimitExceeded" in status["lastError"] and "delete the Job to run it again" in status["lastError"], status["lastError"]
    assert not pods_on(cluster, worker)[0]["metadata"].get("deletionTimestamp"), "a pod was evicted although preDrain failed"
    assert existing(cluster, "node", worker)["spec"].get("unschedulable")

    # A failed postMaintenance keeps the node cordoned and the maintenance in place, saying why.
    cluster.kubectl("delete", NM, name, "--wait=false")
    _finish(cluster, _one_hook_pod(cluster, "post-maintenance", worker, namespace), 1)
    status = eventually(lambda: condition(s := nm_status(cluster, name), "PostMaintenance").get("reason") == "JobFailed" and s,
                        "postMaintenance failure reported", timeout=60)
    assert "postMaintenance Job" in status["lastError"] and "BackoffLimitExceeded" in status["lastError"]
    time.sleep(2)
    assert nm(cluster, name) is not None and existing(cluster, "node", worker)["spec"].get("unschedulable")

    # Deleting the failed Job runs it again; this time it succeeds and the node is handed back.
    failed_job = _hook_pods(cluster, "post-maintenance", namespace)[0]["metadata"]["labels"]["job-name"]
    cluster.kubectl("delete", "job", failed_job, "-n", namespace, "--cascade=foreground", "--timeout=60s")
    _finish(cluster, _one_hook_pod(cluster, "post-maintenance", worker, namespace), 0)
    eventually(lambda: nm(cluster, name) is None, "the maintenance gone after the rerun succeeded", timeout=60)
    assert not existing(cluster, "node", worker)["spec"].get("unschedulable")


class PodWatch(BackgroundWatch):
    """The pods of one namespace: when each began terminating and when it was gone, in order."""

    what = "pod"

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        super().__init__(cluster)
        self.namespace = namespace
        self.log: list[tuple[str, str]] = []

    def listing(self) -> tuple[Callable[..., Any], dict[str, Any]]:
        from kubernetes import client

        return client.CoreV1Api(self.cluster.api_client()).list_namespaced_pod, {"namespace": self.namespace}

    def take(self, event: dict[str, Any]) -> None:
        name = event["object"].metadata.name
        if event["type"] == "DELETED":
            self.log.append(("gone", name))
        elif event["object"].metadata.deletion_timestamp and ("terminating", name) not in self.log:
            self.log.append(("terminating", name))

    def index(self, what: str, name: str) -> int:
        return self.log.index((what, name))


def test_drain_rules_order_skip_and_wait_completed(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]], policies: Callable[..., str]) -> None:
    pool = a_pool()
    (worker,) = nodes(1, labels=pool)
    policies(pool, drainRules=[
        {"podSelector": {"matchLabels": {"tier": "front"}}, "order": 0},
        {"podSelector": {"matchLabels": {"tier": "db"}}, "order": 10},
        {"podSelector": {"matchLabels": {"tier": "batch"}}, "behavior": "WaitCompleted"},
    ])
    # A finalizer keeps front-2 terminating until the test lets it go: order 10 must wait for it.
    apply(cluster,
          pod("front-1", namespace, worker, labels={"tier": "front"}),
          pod("front-2", namespace, worker, labels={"tier": "front"}, finalizers=["e2e.test/hold"]),
          pod("db", namespace, worker, labels={"tier": "db"}),
          pod("batch", namespace, worker, labels={"tier": "batch"}),
          pod("kept", namespace, worker, labels={"tier": "db"}, annotations={"nodemaintenance.kubevirt.io/drain": "skip"}))
    eventually(lambda: sum(p["status"].get("phase") == "Running" for p in pods_on(cluster, worker)) == 5, "five pods running")
    name = f"rules-{worker}"
    with PodWatch(cluster, namespace) as watch:
        create_nm(cluster, name, worker)
        eventually(lambda: ("gone", "front-1") in watch.log and ("terminating", "front-2") in watch.log, "order 0 evicted")
        time.sleep(2)
        assert ("terminating", "db") not in watch.log, "order 10 began before order 0 had left the node"
        cluster.kubectl("patch", "pod", "front-2", "-n", namespace, "--type=json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')
        eventually(lambda: ("gone", "db") in watch.log, "order 10 evicted once order 0 had left")
        assert watch.index("terminating", "db") > watch.index("gone", "front-2")

        # The WaitCompleted pod is never evicted: the drain waits until it completes by itself.
        status = eventually(lambda: (s := nm_status(cluster, name)).get("pendingPods") == ["batch"] and s, "only batch left")
        assert status["phase"] == "Running" and "WaitCompleted" in status["lastError"]
        time.sleep(2)
        assert ("terminating", "batch") not in watch.log
        cluster.kubectl("patch", "pod", "batch", "-n", namespace, "--subresource=status", "--type=merge", "-p", '{"status":{"phase":"Succeeded"}}')
        eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", "drained once batch completed")
    # The pod annotated skip stays, and the drain never waited for it.
    assert [p["metadata"]["name"] for p in pods_on(cluster, worker)] == ["kept"]
    cluster.kubectl("delete", NM, name, "--timeout=60s")


def test_a_node_selected_by_two_policies_is_reported_everywhere_and_not_touched(cluster: Cluster, operator: OperatorProcess, nodes: Callable[..., list[str]], policies: Callable[..., str]) -> None:
    pool = a_pool()
    (worker,) = nodes(1, labels={**pool, "zone": pool["e2e-pool"]})
    first = policies(pool)
    second = policies({"zone": pool["e2e-pool"]})
    name = f"conflict-{worker}"
    create_nm(cluster, name, worker)
    status = eventually(lambda: (s := nm_status(cluster, name)).get("phase") == "Pending" and s.get("lastError") and s, "the conflict reported")
    assert first in status["lastError"] and second in status["lastError"] and "more than one NodeMaintenancePolicy" in status["lastError"]
    assert condition(status, "Queued")["reason"] == "PolicyConflict"
    for policy in (first, second):
        conflict = eventually(lambda: condition(policy_status(cluster, policy), "Conflict").get("status") == "True" and policy_status(cluster, policy),
                              f"{policy} reports the conflict")
        assert conflict["conflicts"] == [{"node": worker, "policies": sorted([first, second])}]
    assert not existing(cluster, "node", worker)["spec"].get("unschedulable")
    # Once only one policy selects the node, the maintenance goes ahead: a policy deleted still counts for 30 s.
    cluster.kubectl("delete", NMP, second)
    status = eventually(lambda: (s := nm_status(cluster, name)).get("phase") == "Succeeded" and s, "drained after the conflict ended", timeout=120)
    assert condition(status, "Queued")["reason"] == "SlotGranted" and first in condition(status, "Queued")["message"]
    cluster.kubectl("delete", NM, name, "--timeout=60s")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"maxParallel": "two"}, 'maxParallel must be a count of 0 or more, or a percentage such as "20%"'),
        ({"maxUnavailable": -1}, 'maxUnavailable must be a count of 0 or more, or a percentage such as "10%"'),
        ({"drainRules": [{"podSelector": {}, "behavior": "Skip", "order": 3}]}, "order applies to behavior Drain only; remove order or set behavior: Drain"),
    ],
)
def test_bad_policies_are_refused_naming_the_field_and_the_fix(cluster: Cluster, policy_crd: str, spec: dict[str, Any], message: str) -> None:
    policy = {"apiVersion": "nodemaintenance.kubevirt.io/v1beta1", "kind": "NodeMaintenancePolicy", "metadata": {"name": f"bad-{uuid.uuid4().hex[:6]}"},
              "spec": {"nodeSelector": {"matchLabels": a_pool()}, **spec}}
    result = cluster.kubectl("apply", "-f", "-", input=json.dumps(policy), check=False)
    assert result.returncode != 0 and message in result.stderr, result.stderr
