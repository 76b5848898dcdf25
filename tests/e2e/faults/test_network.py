"""Network faults between the operator and the API server (through Toxiproxy) in the middle of a drain
of three nodes under PodDisruptionBudgets: the operator recovers, finishes, and no budget is broken."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable

import pytest

from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess
from devcluster.toxiproxy import Proxy
from soak.chaos import Api, Supervisor, Tally

from ..helpers import eventually
from .helpers import drain_with_fault, give_back, lease_renewed_after, log_lines_since, poke, refused, request_seconds, watches_since

pytestmark = pytest.mark.e2e

LATENCY_MS = 400
BLACKOUT_SECONDS = 30


def test_added_latency(cluster: Cluster, admin: Api, namespace: str, run_id: str, tally: Tally, api_proxy: Proxy,
                       supervised: Supervisor) -> None:
    baseline = request_seconds(api_proxy, cluster)
    measured: list[float] = []

    def slow_link(go_on: Callable[[], None]) -> None:
        api_proxy.add_toxic("latency", {"latency": LATENCY_MS, "jitter": 100})
        api_proxy.add_toxic("latency", {"latency": LATENCY_MS, "jitter": 100}, stream="upstream")
        measured.append(request_seconds(api_proxy, cluster))
        go_on()

    drain = drain_with_fault(cluster, admin, namespace, run_id, tally, slow_link)  # the toxics stay until the end
    # The fault happened: a request through the proxy now takes at least the added delay both ways.
    assert measured[0] >= 2 * (LATENCY_MS - 100) / 1000 > baseline, (baseline, measured)
    assert tally.violations == [] and tally.exits == [], (tally.violations, tally.exits)
    for toxic in api_proxy.toxics():
        api_proxy.remove_toxic(toxic["name"])  # the nodes are given back on a plain link
    give_back(admin, drain.workload, tally)
    assert tally.violations == []


def test_connections_reset_in_the_middle_of_watches(cluster: Cluster, admin: Api, namespace: str, run_id: str, tally: Tally,
                                                    api_proxy: Proxy, proxied_operator: OperatorProcess, supervised: Supervisor) -> None:
    def reset_three_times(go_on: Callable[[], None]) -> None:
        for round_ in range(3):
            if round_ == 2:
                go_on()  # two resets while the drain holds on its budgets, one while it goes on
            offset = len(proxied_operator.logs())
            with api_proxy.toxic("reset_peer", {"timeout": 0}):
                # Events on the watches the operator holds (budgets, pods): each link is reset as one passes.
                poke(admin, ("budgets", "pods"), namespace, f"fault-test/poke={round_}")
                # The fault happened: the operator's watches broke.
                eventually(lambda: "failed" in watches_since(proxied_operator, offset).values(), "the operator's watches reset", timeout=30)
            ended = datetime.datetime.now(datetime.UTC)
            if round_ < 2:
                # ... and resumed, and the Lease was renewed, before the next round breaks them again: a round then resets
                # watches that are open, not ones still waiting out their backoff, and the rounds together never keep
                # the Lease from being renewed for as long as the operator holds the lead without renewing it.
                eventually(lambda: set(watches_since(proxied_operator, offset).values()) == {"is current again"},
                           "the operator's watches current again", timeout=60)
                eventually(lambda: lease_renewed_after(admin, proxied_operator, ended), "the operator's Lease renewed", timeout=30)

    drain = drain_with_fault(cluster, admin, namespace, run_id, tally, reset_three_times)
    assert api_proxy.injected["reset_peer"] == 3
    assert tally.violations == [] and tally.exits == [], (tally.violations, tally.exits)
    give_back(admin, drain.workload, tally)
    assert tally.violations == []


def test_thirty_second_blackout(cluster: Cluster, admin: Api, namespace: str, run_id: str, tally: Tally, api_proxy: Proxy,
                                proxied_operator: OperatorProcess, supervised: Supervisor) -> None:
    seen: dict[str, object] = {}
    assert proxied_operator.process is not None
    pid = proxied_operator.process.pid

    def blackout(go_on: Callable[[], None]) -> None:
        offset = len(proxied_operator.logs())
        with api_proxy.blackout():
            started = time.monotonic()
            seen["refused"] = refused(api_proxy)
            go_on()  # the budgets free up while the operator cannot see it
            time.sleep(BLACKOUT_SECONDS - (time.monotonic() - started))
        seen["failures"] = len(log_lines_since(proxied_operator, offset, "failed"))
        # Longer than the Lease: the operator stopped reconciling and competes for the Lease again, in the same process.
        seen["competed again"] = bool(eventually(lambda: log_lines_since(proxied_operator, offset, "competing for it again"),
                                                 "the operator competing for the Lease again", timeout=20))

    drain = drain_with_fault(cluster, admin, namespace, run_id, tally, blackout)
    # The fault happened: the proxy refused connections, and the operator met failing requests.
    assert seen["refused"] is True and seen["failures"], seen
    assert drain.seconds >= BLACKOUT_SECONDS
    assert proxied_operator.process.pid == pid and tally.exits == [], tally.exits
    assert tally.violations == [], tally.violations
    give_back(admin, drain.workload, tally)
    assert tally.violations == []
