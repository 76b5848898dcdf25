"""`kubectl nm` as a user runs it: found by kubectl on PATH, against the local cluster and the operator.

The central scenario checks that `kubectl nm plan` predicts what the operator then does: the pods it
evicts or deletes, the pods it cannot evict, and the PodDisruptionBudgets it reports in the way.
"""

from __future__ import annotations

import os
import pty
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from devcluster.cluster import Cluster
from devcluster.operator import USER as OPERATOR_USER
from devcluster.operator import OperatorProcess

from .helpers import PLUGIN_DIR, Run, apply, daemonset, deployment, eventually, get, kubectl_nm, nm, node, our_taint, pdb, plugin_env, pod, pods_on

pytestmark = pytest.mark.e2e


def on_terminal(cluster: Cluster, *args: str, timeout: float = 120) -> Run:
    """``kubectl nm ARGS`` with a terminal as stdout and stderr, where rich draws bars and colours."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(["kubectl", "nm", *args], env={**plugin_env(cluster), "COLUMNS": "160", "TERM": "xterm"},
                               stdin=subprocess.DEVNULL, stdout=follower, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed: the process is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return Run(process.wait(timeout=timeout), b"".join(chunks).decode(errors="replace"), "")


def _running(cluster: Cluster, namespace: str, count: int) -> None:
    def ready() -> bool:
        listing = get(cluster, "pods", "-n", namespace)
        return listing is not None and sum(p["status"].get("phase") in ("Running", "Succeeded") for p in listing["items"]) >= count

    eventually(ready, f"{count} pods running in {namespace}")


def _operator_removals(cluster: Cluster, namespace: str) -> tuple[set[str], set[str]]:
    """(pods the operator evicted or deleted, pods whose eviction a budget refused), from the audit log."""
    removed, refused = set(), set()
    for event in cluster.audit_events(OPERATOR_USER):
        ref, code = event.get("objectRef", {}), event.get("responseStatus", {}).get("code")
        if ref.get("namespace") != namespace or ref.get("resource") != "pods":
            continue
        eviction = ref.get("subresource") == "eviction" and event["verb"] == "create"
        deletion = not ref.get("subresource") and event["verb"] == "delete"
        if (eviction or deletion) and code in (200, 201):
            removed.add(ref["name"])
        if eviction and code == 429:
            refused.add(ref["name"])
    return removed, refused


def test_kubectl_finds_the_plugin(cluster: Cluster) -> None:
    listed = subprocess.run(["kubectl", "plugin", "list"], env=plugin_env(cluster), capture_output=True, text=True)
    assert str(PLUGIN_DIR / "kubectl-nm") in listed.stdout, listed.stdout + listed.stderr
    usage = kubectl_nm(cluster, "--help")
    assert usage.code == 0 and "exit codes" in usage.out and "plan" in usage.out


def test_plan_predicts_what_the_operator_evicts_and_what_blocks_it(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]]) -> None:
    target, spare = nodes(2)
    cluster.kubectl("cordon", spare)  # everything lands on the target, and evicted web pods find no room at first
    web, solo = {"app": "web"}, {"app": "solo"}
    apply(
        cluster,
        deployment("web", namespace, [target, spare], 3, web),
        pdb("web", namespace, web, minAvailable=2),  # allows 1 at a time: temporary
        pod("solo", namespace, target, labels=solo),
        pdb("solo", namespace, solo, minAvailable=1),  # its only pod must stay: structural
        pod("free", namespace, target, labels={"app": "free"}),
        pod("mirror", namespace, target, annotations={"kubernetes.io/config.mirror": "static"}),
        daemonset("agent", namespace, [target]),
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "batch", "namespace": namespace},
         "spec": {"template": {"spec": {"restartPolicy": "Never", "nodeName": target,
                                        "containers": [{"name": "c", "image": "registry.invalid/job:1"}]}}}},
    )
    _running(cluster, namespace, 8)
    eventually(lambda: (get(cluster, "pdb", "web", "-n", namespace) or {}).get("status", {}).get("disruptionsAllowed") == 1, "web allows 1")
    eventually(lambda: (get(cluster, "pdb", "solo", "-n", namespace) or {}).get("status", {}).get("currentHealthy") == 1, "solo counted")
    eventually(lambda: any(p["status"]["phase"] == "Succeeded" for p in pods_on(cluster, target)), "the Job's pod finished")

    # The plan, before anything happens.
    planned = kubectl_nm(cluster, "plan", target, "-o", "json")
    assert planned.code == 4, planned.err  # a structural block: the drain cannot finish
    plan = planned.json()
    action = {row["name"]: row["action"] for row in plan["pods"]}
    web_pods = sorted(name for name in action if name.startswith("web-"))
    job_pod = next(name for name in action if name.startswith("batch-"))
    agent_pod = next(name for name in action if name.startswith("agent-"))
    assert len(web_pods) == 3
    assert action == {**dict.fromkeys(web_pods, "evict"), "solo": "evict", "free": "evict", job_pod: "delete", "mirror": "stay", agent_pod: "stay"}
    blockers = {tuple(b["budgets"]): b for b in plan["blockers"]}
    assert set(blockers) == {(f"{namespace}/web",), (f"{namespace}/solo",)}
    assert blockers[(f"{namespace}/solo",)]["kind"] == "structural" and blockers[(f"{namespace}/solo",)]["pods"] == [f"{namespace}/solo"]
    assert blockers[(f"{namespace}/web",)]["kind"] == "temporary"
    assert blockers[(f"{namespace}/web",)]["pods"] == [f"{namespace}/{w}" for w in web_pods]
    stuck = {row["name"] for row in plan["pods"] if any(b["kind"] == "structural" for b in row["blockedBy"])}
    going = {row["name"] for row in plan["pods"] if row["action"] != "stay"}
    assert stuck == {"solo"} and plan["drainable"] is False

    table = kubectl_nm(cluster, "plan", target)
    assert table.code == 4 and "structural" in table.out and f"{namespace}/solo" in table.out and "cannot finish" in table.out

    # The operator at work.
    started = kubectl_nm(cluster, "start", target, "--reason", "plan agreement", "-o", "json")
    assert started.code == 0, started.err
    assert started.json()["spec"] == {"nodeName": target, "reason": "plan agreement"}

    def reported() -> str:
        status = kubectl_nm(cluster, "status", target, "-o", "json").json()["items"][0].get("status") or {}
        error = status.get("lastError", "")
        return error if f"{namespace}/web" in error and f"{namespace}/solo" in error else ""

    # While the spare node stays cordoned, evicted web pods have nowhere to go: both budgets hold the drain.
    eventually(reported, "the operator reporting both budgets the plan named", timeout=60)
    during = kubectl_nm(cluster, "plan", target, "-o", "json").json()
    kinds = {tuple(b["budgets"]): b["kind"] for b in during["blockers"]}
    assert kinds == {(f"{namespace}/web",): "temporary", (f"{namespace}/solo",): "structural"}, during["blockers"]
    assert during["inMaintenanceBy"] == target

    cluster.kubectl("uncordon", spare)

    def settled() -> dict[str, Any]:
        status = (nm(cluster, target) or {}).get("status") or {}
        refs = [f"{r['namespace']}/{r['name']}" for r in status.get("pendingPodsRefs") or []]
        return status if refs == [f"{namespace}/solo"] and f"{namespace}/web" not in status.get("lastError", "") else {}

    status = eventually(settled, "only the structurally blocked pod left", timeout=90)
    assert status["phase"] == "Running" and f"PodDisruptionBudget {namespace}/solo" in status["lastError"]
    removed, refused = _operator_removals(cluster, namespace)
    assert removed == going - stuck, f"plan said {sorted(going - stuck)}, the operator removed {sorted(removed)}"
    assert "solo" not in removed
    assert refused <= set(web_pods) | {"solo"}, f"refused pods no budget in the plan covers: {refused}"

    watching = kubectl_nm(cluster, "status", target)
    assert watching.code == 0 and "Running" in watching.out and f"{namespace}/solo" in watching.out

    stopped = kubectl_nm(cluster, "stop", target, "--wait", "-o", "json")
    assert stopped.code == 0, stopped.err
    assert stopped.json() == {"node": target, "deleted": [target], "gone": True}
    assert nm(cluster, target) is None
    given_back = node(cluster, target)
    assert not given_back["spec"].get("unschedulable") and not our_taint(given_back)


def test_start_wait_fails_with_exit_code_4_and_errors_name_the_fix(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]]) -> None:
    (target,) = nodes(1)
    apply(cluster, pod("stuck", namespace, target, labels={"app": "stuck"}), pdb("stuck", namespace, {"app": "stuck"}, minAvailable=1))
    _running(cluster, namespace, 1)
    eventually(lambda: (get(cluster, "pdb", "stuck", "-n", namespace) or {}).get("status", {}).get("currentHealthy") == 1, "PDB counts the pod")

    failed = kubectl_nm(cluster, "start", target, "--reason", "doomed", "--timeout", "4s", "--wait")
    assert failed.code == 4, failed.out + failed.err
    assert f"NodeMaintenance {target} Failed" in failed.err and "timed out" in failed.err and f"{namespace}/stuck" in failed.err
    assert "Failed" in failed.out  # the final table

    status = kubectl_nm(cluster, "status", target, "-o", "yaml")
    assert status.code == 4 and "phase: Failed" in status.out

    again = kubectl_nm(cluster, "start", target, "--reason", "twice")
    assert again.code == 5 and f"already in maintenance by NodeMaintenance {target}" in again.err and "kubectl nm stop" in again.err

    assert kubectl_nm(cluster, "stop", target, "--wait").code == 0
    for verb in ("status", "stop"):
        missing = kubectl_nm(cluster, verb, target)
        assert missing.code == 3 and f"node {target} is not in maintenance" in missing.err

    unknown = kubectl_nm(cluster, "start", "no-such-node", "--reason", "x")
    assert unknown.code == 3 and "node no-such-node not found" in unknown.err and "kubectl get nodes" in unknown.err
    invalid = kubectl_nm(cluster, "start", target, "--name", "Not_A_Name", "--reason", "x")
    assert invalid.code == 2 and "Not_A_Name" in invalid.err
    nowhere = cluster.workdir / "missing.kubeconfig"
    lost = kubectl_nm(cluster, "status", target, kubeconfig=nowhere)
    assert lost.code == 1 and str(nowhere) in lost.err and "--kubeconfig" in lost.err
    flag = kubectl_nm(cluster, "plan", target, "--kubeconfig", str(cluster.kubeconfig), "-o", "json", kubeconfig=nowhere)
    assert flag.code == 4 and flag.json()["blockers"][0]["kind"] == "structural"


def test_start_wait_and_status_watch_draw_progress_on_a_terminal(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]]) -> None:
    target, spare = nodes(2)
    cluster.kubectl("cordon", spare)
    apply(cluster, deployment("app", namespace, [target, spare], 2), pod("loose", namespace, target))
    _running(cluster, namespace, 3)
    cluster.kubectl("uncordon", spare)

    drawn = on_terminal(cluster, "start", target, "--reason", "terminal", "--pod-selector", "app=app", "--wait")
    assert drawn.code == 0, drawn.out
    assert "━" in drawn.out and "100%" in drawn.out and "Succeeded" in drawn.out  # rich's bar, then the final table
    assert [p["metadata"]["name"] for p in pods_on(cluster, target)] == ["loose"]  # the selector held

    watched = kubectl_nm(cluster, "status", target, "--watch", "-o", "json", timeout=30)
    assert watched.code == 0 and watched.json()["items"][0]["status"]["phase"] == "Succeeded"
    live = on_terminal(cluster, "status", target, "--watch", timeout=30)
    assert live.code == 0 and target in live.out and "100%" in live.out

    assert on_terminal(cluster, "stop", target, "--wait").code == 0
    assert nm(cluster, target) is None
