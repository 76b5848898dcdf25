"""NodeMaintenancePolicy pacing end to end: a maintenance window that opens and closes during the test (the queue
waits for it, windowEnd Pause stops a drain at its end), and topology limits (each zone one node at a time, the
zones side by side)."""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Callable

import pytest

from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess
from node_maintenance.api import timestamps

from .helpers import NM, CordonWatch, a_pool, apply, condition, create_nm, eventually, existing, get, nm_status, pdb, pod, pods_on, policy_status

pytestmark = pytest.mark.e2e

WINDOW_SECONDS = 40


def _next_minute(lead: float = 15) -> datetime.datetime:
    """The first whole minute at least ``lead`` seconds ahead: cron fires on whole minutes."""
    return (datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=lead + 60)).replace(second=0, microsecond=0)


def test_queued_maintenances_wait_for_the_window_and_a_drain_pauses_at_its_end(cluster: Cluster, operator: OperatorProcess, namespace: str, nodes: Callable[..., list[str]],
                                                                             policies: Callable[..., str]) -> None:
    pool = a_pool()
    blocked_node, free_node = nodes(2, labels=pool)
    # The held pod's budget allows no eviction until the test relaxes it, after the window has closed.
    apply(cluster, pod("held", namespace, blocked_node, labels={"app": "held"}), pod("free", namespace, free_node),
          pdb("held", namespace, {"app": "held"}, minAvailable=1))
    eventually(lambda: (get(cluster, "pdb", "held", "-n", namespace) or {}).get("status", {}).get("currentHealthy") == 1, "the budget sees its pod")
    opens = _next_minute()
    closes = opens + datetime.timedelta(seconds=WINDOW_SECONDS)
    policy = policies(pool, windowEnd="Pause", windows=[{"schedule": f"{opens.minute} {opens.hour} * * *", "duration": f"{WINDOW_SECONDS}s"}])
    blocked, free = f"window-{blocked_node}", f"window-{free_node}"
    create_nm(cluster, blocked, blocked_node)
    create_nm(cluster, free, free_node)

    # Before the window: both wait in line, saying for what and until when, and neither node is touched.
    for name in (blocked, free):
        queued = eventually(lambda: condition(nm_status(cluster, name), "Queued").get("reason") == "WaitingForWindow" and
                            condition(nm_status(cluster, name), "Queued"), f"{name} waiting for the window")
        assert f"the next opens at {timestamps.rfc3339(opens)}" in queued["message"], queued
        assert nm_status(cluster, name)["phase"] == "Pending"
    status = policy_status(cluster, policy)
    assert status["windowOpen"] is False and status["nextWindow"] == timestamps.rfc3339(opens) and "windowCloses" not in status, status
    assert datetime.datetime.now(datetime.UTC) < opens, "the test's setup outlasted its lead on the window"
    assert not any(existing(cluster, "node", n)["spec"].get("unschedulable") for n in (blocked_node, free_node))

    # The window opens: both take their node, no earlier; the free node drains, the held pod's budget holds the other.
    status = eventually(lambda: (s := nm_status(cluster, free)).get("phase") == "Succeeded" and s, "the free node drained", timeout=120)
    assert timestamps.parse(status["drainStartTime"]) >= opens, status
    assert condition(status, "Queued")["reason"] == "SlotGranted"
    held = eventually(lambda: (s := nm_status(cluster, blocked)).get("phase") == "Running" and s, "the held node taken")
    assert timestamps.parse(held["drainStartTime"]) >= opens, held
    window = eventually(lambda: (s := policy_status(cluster, policy)).get("windowOpen") and s, "the policy's window open")
    assert window["windowCloses"] == timestamps.rfc3339(closes), window

    # The window closes: the held node's drain pauses, and evicts nothing even once its budget would allow it.
    status = eventually(lambda: "paused until the next maintenance window" in (s := nm_status(cluster, blocked)).get("lastError", "") and s,
                        "the drain paused at the window's end", timeout=90)
    assert f"NodeMaintenancePolicy {policy}" in status["lastError"] and "stays cordoned" in status["lastError"], status
    assert policy_status(cluster, policy)["windowOpen"] is False
    cluster.kubectl("patch", "pdb", "held", "-n", namespace, "--type=merge", "-p", json.dumps({"spec": {"minAvailable": 0}}))
    eventually(lambda: (get(cluster, "pdb", "held", "-n", namespace) or {}).get("status", {}).get("disruptionsAllowed") == 1, "the budget relaxed")
    time.sleep(3)  # a drain going on evicts within a second of its budget allowing it
    (left,) = pods_on(cluster, blocked_node)
    assert left["metadata"]["name"] == "held" and not left["metadata"].get("deletionTimestamp"), "a pod was evicted after the window closed"
    assert existing(cluster, "node", blocked_node)["spec"].get("unschedulable")
    assert "paused until the next maintenance window" in nm_status(cluster, blocked)["lastError"]
    cluster.kubectl("delete", NM, blocked, free, "--timeout=60s")


def test_topology_limits_take_one_node_per_zone_at_a_time_and_the_zones_side_by_side(cluster: Cluster, operator: OperatorProcess, nodes: Callable[..., list[str]], policies: Callable[..., str]) -> None:
    pool = a_pool()
    zone_key = "topology.kubernetes.io/zone"
    zones = {zone: nodes(3, labels={**pool, zone_key: zone}) for zone in (f"{pool['e2e-pool']}-{z}" for z in "abc")}
    zone_of = {n: zone for zone, members in zones.items() for n in members}
    policies(pool, topologyLimits=[{"topologyKey": zone_key, "maxParallel": 1}])
    # Created zone by zone: the second of the first zone waits, and must keep none of the other zones waiting.
    names = [f"zoned-{n}" for members in zones.values() for n in members]
    with CordonWatch(cluster, pool) as watch:
        for name in names:
            create_nm(cluster, name, name.removeprefix("zoned-"))
        firsts = [f"zoned-{members[0]}" for members in zones.values()]
        eventually(lambda: all(nm_status(cluster, n).get("phase") == "Succeeded" for n in firsts), "the first of each zone drained")
        # The last of a zone is created after the first of the next: it may be in line a moment after that one drained.
        for name in sorted(set(names) - set(firsts)):
            queued = eventually(lambda: (c := condition(nm_status(cluster, name), "Queued")).get("reason") == "WaitingForSlot" and c,
                                f"{name} waiting for a slot")
            assert f"topology domain {zone_key}={zone_of[name.removeprefix('zoned-')]} is full" in queued["message"], queued
        # The admin hands each node back once drained, the zones' lines moving independently.
        remaining = list(names)
        while remaining:
            drained = eventually(lambda: [n for n in remaining if nm_status(cluster, n).get("phase") == "Succeeded"], "one more drained")
            cluster.kubectl("delete", NM, *drained, "--timeout=60s")
            remaining = [n for n in remaining if n not in drained]
        eventually(lambda: not watch.cordoned, "every node handed back")
    per_zone = [{zone: sum(zone_of[n] == zone for n in moment) for zone in zones} for moment in watch.moments]
    assert max(max(counts.values()) for counts in per_zone) == 1, "two nodes of one zone were in maintenance at once"
    assert any(all(counts.values()) for counts in per_zone), "the zones did not proceed side by side"
    assert sorted(watch.order) == sorted(zone_of) and sorted(watch.released) == sorted(zone_of)
