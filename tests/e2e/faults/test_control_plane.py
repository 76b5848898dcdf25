"""Control-plane faults in the middle of a drain of three nodes under budgets: kube-apiserver restarts,
then etcd, then etcd's history is compacted so the operator's watches can only end with 410 Gone.
The operator carries on without a restart of its own, finishes, and no budget is broken."""

from __future__ import annotations

import time
from typing import Callable

import pytest
from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess

from soak.chaos import Api, Supervisor, Tally

from ..test_drain import OPERATOR_USER
from .helpers import drain_with_fault, give_back, log_lines_since

pytestmark = pytest.mark.e2e


def _pod_lists(cluster: Cluster) -> int:
    """Lists of pods the operator made: each watch lists once when it starts, and again only after 410 Gone."""
    return sum(1 for e in cluster.audit_events(OPERATOR_USER) if e.get("verb") == "list" and e.get("objectRef", {}).get("resource") == "pods")


def test_apiserver_and_etcd_restarts_and_a_compaction(cluster: Cluster, admin: Api, namespace: str, run_id: str, tally: Tally,
                                                      proxied_operator: OperatorProcess, supervised: Supervisor) -> None:
    pid = proxied_operator.process.pid
    seen: dict[str, object] = {}

    def control_plane_faults(go_on: Callable[[], None]) -> None:
        offset = len(proxied_operator.logs())
        old = cluster.processes[[p.name for p in cluster.processes].index("kube-apiserver")].pid
        seen["apiserver restarted"] = cluster.restart("kube-apiserver").pid != old
        seen["watches broke on the apiserver restart"] = bool(log_lines_since(proxied_operator, offset, "watch of"))
        time.sleep(1)
        old = cluster.processes[[p.name for p in cluster.processes].index("etcd")].pid
        seen["etcd restarted"] = cluster.restart("etcd").pid != old
        time.sleep(1)
        lists = _pod_lists(cluster)
        seen["compacted at"] = cluster.etcd_compact()
        # The API server's watch cache still holds recent history; a restart drops it, so resuming watches
        # can only be served from etcd's history, which no longer goes back that far: 410 Gone.
        cluster.restart("kube-apiserver")
        time.sleep(5)
        seen["relists after the compaction"] = _pod_lists(cluster) - lists
        go_on()

    drain = drain_with_fault(cluster, admin, namespace, run_id, tally, control_plane_faults)
    assert seen["apiserver restarted"] and seen["etcd restarted"], seen
    assert seen["watches broke on the apiserver restart"], seen
    assert seen["relists after the compaction"] >= 3, f"no watch ended with 410 Gone: {seen}"
    # Carried on without a restart of its own.
    assert proxied_operator.process.pid == pid and proxied_operator.process.alive() and tally.exits == [], tally.exits
    assert tally.violations == [], tally.violations
    give_back(admin, drain.workload, tally)
    assert tally.violations == []
