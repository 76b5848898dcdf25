"""Every watch of the operator goes silent in the middle of a drain of three nodes under budgets: the
connections stay open and send nothing, as connections a NAT or load balancer forgot (no reset, no end).
Each watch notices the silence, starts again, and the drain finishes without a budget broken."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest

from devcluster.cluster import Cluster
from devcluster.httpproxies import FaultProxy
from devcluster.operator import OperatorProcess
from soak.chaos import Api, Tally

from ..faults.helpers import drain_with_fault, give_back, log_lines_since
from ..helpers import eventually

pytestmark = pytest.mark.e2e

# The operator notices a silent watch after client.async_http.WATCH_INACTIVITY_SECONDS (kopf's own after 70 s).
NOTICED_SECONDS = 150


def a_watch(_method: str, _path: str, query: Mapping[str, str]) -> bool:
    return query.get("watch") == "true"


def test_watches_silently_dropped_in_the_middle_of_a_drain(cluster: Cluster, admin: Api, namespace: str, run_id: str, tally: Tally,
                                                           fault_proxy: FaultProxy, faulted_operator: OperatorProcess) -> None:
    seen: dict[str, object] = {}

    def silent_drop(go_on: Callable[[], None]) -> None:
        offset = len(faulted_operator.logs())
        before = fault_proxy.silenced
        fault_proxy.silence(a_watch)
        # The budgets free up now: only a watch that noticed its silence and started again can tell the drain.
        go_on()
        seen["budget watch noticed"] = eventually(
            lambda: log_lines_since(faulted_operator, offset, "watch of /apis/policy/v1/poddisruptionbudgets failed"),
            "the operator noticing its silent budget watch", timeout=NOTICED_SECONDS)
        seen["silenced"] = fault_proxy.silenced - before

    drain = drain_with_fault(cluster, admin, namespace, run_id, tally, silent_drop, timeout=NOTICED_SECONDS + 120)
    # The fault happened: the watches under way (budgets, nodes, pods, NodeMaintenances) went silent.
    assert isinstance(seen["silenced"], int) and seen["silenced"] >= 4, seen
    assert seen["budget watch noticed"], seen
    assert faulted_operator.process is not None and faulted_operator.process.alive()
    assert tally.violations == [], tally.violations
    give_back(admin, drain.workload, tally)
    assert tally.violations == []
