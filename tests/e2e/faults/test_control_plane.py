"""Control-plane faults in the middle of a drain of three nodes under budgets: kube-apiserver restarts,
then etcd, then etcd's history is compacted under the operator's pod watches so they end with 410 Gone.
The operator carries on without a restart of its own, finishes, and no budget is broken."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import pytest

from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess
from devcluster.toxiproxy import Proxy
from soak.chaos import Api, Supervisor, Tally

from ..helpers import eventually
from .helpers import drain_with_fault, give_back, log_lines_since, poke

pytestmark = pytest.mark.e2e

# The API server serves watches of pods from etcd rather than its watch cache, which would otherwise
# answer a resuming watch from its own recent history, whatever etcd compacted.
POD_WATCHES_FROM_ETCD = "--watch-cache-sizes=pods#0"


def _pid(cluster: Cluster, name: str) -> int:
    return next(p.pid for p in cluster.processes if p.name == name)


def test_apiserver_and_etcd_restarts_and_a_compaction(cluster: Cluster, admin: Api, namespace: str, run_id: str, tally: Tally,
                                                      api_proxy: Proxy, proxied_operator: OperatorProcess, supervised: Supervisor) -> None:
    assert proxied_operator.process is not None
    pid = proxied_operator.process.pid
    seen: dict[str, object] = {}

    def control_plane_faults(go_on: Callable[[], None]) -> None:
        offset = len(proxied_operator.logs())
        old = _pid(cluster, "kube-apiserver")
        seen["apiserver restarted"] = cluster.restart("kube-apiserver", POD_WATCHES_FROM_ETCD).pid != old
        seen["watches broke on the apiserver restart"] = bool(eventually(lambda: log_lines_since(proxied_operator, offset, "watch of"),
                                                                         "the operator's watches broken by the restart", timeout=60))
        old = _pid(cluster, "etcd")
        seen["etcd restarted"] = cluster.restart("etcd").pid != old
        time.sleep(2)
        # Cut the operator's watches for a moment (shorter than its Lease), let pods change and compact etcd
        # meanwhile: the watches resume from a revision etcd no longer holds. A reconciler that restarted after
        # the API server's restart may still be listing afresh; then the next round catches its watches.
        for round_ in range(3):
            offset = len(proxied_operator.logs())
            with api_proxy.blackout():
                poke(admin, ("pods",), namespace, f"fault-test/compacted={round_}")
                seen["compacted at"] = cluster.etcd_compact()
            with contextlib.suppress(AssertionError):
                seen["410 Gone"] = eventually(lambda: log_lines_since(proxied_operator, offset, "expired (410 Gone)"),
                                              "a watch of the operator ending with 410 Gone", timeout=20)
                break
        go_on()

    try:
        drain = drain_with_fault(cluster, admin, namespace, run_id, tally, control_plane_faults)
    finally:
        cluster.restart("kube-apiserver")  # as the rest of the session expects it
    assert seen["apiserver restarted"] and seen["etcd restarted"], seen
    assert seen["watches broke on the apiserver restart"], seen
    assert seen.get("410 Gone"), f"no watch of the operator ended with 410 Gone after three compactions: {seen}"
    # Carried on without a restart of its own.
    assert proxied_operator.process.pid == pid and proxied_operator.process.alive() and tally.exits == [], tally.exits
    assert tally.violations == [], tally.violations
    give_back(admin, drain.workload, tally)
    assert tally.violations == []
