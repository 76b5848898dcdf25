"""A policy's waitForHealthy end to end: a slot freed by a finished maintenance goes to the next one only once
the workloads evicted from its node are healthy again.

The evicted pod's replacement is kept from running by a taint of the test's own on the only node it may run on
(KWOK makes a pod Ready as soon as it is bound to a node it manages): the replacement stays Pending, not Ready,
until the test removes the taint.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess

from .helpers import NM, apply, create_nm, deployment, eventually, get, nm_status, node, pdb, policy_status

pytestmark = pytest.mark.e2e
HOLD = "e2e.nodemaintenance.kubevirt.io/hold"


def _queued(status: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c["type"] == "Queued"), {})


def _ready(cluster: Cluster, namespace: str, app: str) -> bool:
    listing = get(cluster, "pods", "-n", namespace, "-l", f"app={app}") or {"items": []}
    return any(c["type"] == "Ready" and c["status"] == "True" for p in listing["items"] for c in p["status"].get("conditions") or [])


def test_a_freed_slot_waits_until_the_evicted_workload_is_healthy_again(cluster: Cluster, operator: OperatorProcess, nodes: Callable[..., list[str]], policies: Callable[..., str],
                                                                        namespace: str) -> None:
    pool = {"e2e-pool": uuid.uuid4().hex[:8]}
    first, second = nodes(2, labels=pool)
    policy = policies(pool, maxParallel=1, waitForHealthy=True)
    apply(cluster, deployment("web", namespace, [first], 1), pdb("web", namespace, {"app": "web"}, maxUnavailable=1))
    eventually(lambda: _ready(cluster, namespace, "web"), "the web pod Ready")

    create_nm(cluster, f"a-{first}", first)
    status = eventually(lambda: (s := nm_status(cluster, f"a-{first}")).get("phase") == "Succeeded" and s, "the first node drained")
    assert status["evictedWorkloads"] == [{"kind": "PodDisruptionBudget", "namespace": namespace, "name": "web"}], status
    create_nm(cluster, f"b-{second}", second)
    eventually(lambda: _queued(nm_status(cluster, f"b-{second}")).get("reason") == "WaitingForSlot", "the second in line")

    # The first node given back, its replacement pod still may not run there: the slot stays in use.
    cluster.kubectl("taint", "node", first, f"{HOLD}=true:NoSchedule")
    cluster.kubectl("delete", NM, f"a-{first}", "--timeout=60s")
    assert not node(cluster, first)["spec"].get("unschedulable")
    waiting = f"PodDisruptionBudget {namespace}/web: 0 of 1 healthy"
    # Recorded before the hand-back (waiting for it too), then, once the node is seen back, waiting for the workload.
    eventually(lambda: [(r["node"], r["waitingFor"]) for r in policy_status(cluster, policy).get("recovering") or ()] == [(first, [waiting])],
               "the first node recovering, waiting for its workload")
    time.sleep(3)  # a slot given to the second would have taken its node by now
    assert _queued(nm_status(cluster, f"b-{second}")).get("reason") == "WaitingForSlot", nm_status(cluster, f"b-{second}")
    assert not node(cluster, second)["spec"].get("unschedulable")
    condition = next(c for c in policy_status(cluster, policy)["conditions"] if c["type"] == "Recovering")
    assert (condition["status"], condition["reason"]) == ("True", "WaitingForHealthy") and waiting in condition["message"], condition

    # The replacement runs and is Ready: the budget is whole again, and the second takes the slot.
    cluster.kubectl("taint", "node", first, f"{HOLD}-")
    eventually(lambda: nm_status(cluster, f"b-{second}").get("phase") == "Succeeded", "the second drained once the workload is healthy")
    assert _ready(cluster, namespace, "web")
    status = eventually(lambda: (s := policy_status(cluster, policy)).get("recovering") == [] and s, "nothing recovering")
    condition = next(c for c in status["conditions"] if c["type"] == "Recovering")
    assert (condition["status"], condition["reason"]) == ("False", "Healthy"), condition
    cluster.kubectl("delete", NM, f"b-{second}", "--timeout=60s")
