"""The operator SIGKILLed every few seconds while ten nodes drain and NodeMaintenances are created and
deleted at random; the invariants (simulation.holding, simulation.budgets) are checked after every step."""

from __future__ import annotations

import random
import time

import pytest

from devcluster.cluster import Cluster
from soak.chaos import Api, BudgetMonitor, Loop, Supervisor, Tally, build_workload

pytestmark = pytest.mark.e2e

LOOP_SECONDS = 45
KILLS = LOOP_SECONDS // 6  # the SIGKILLs asked of the loop: one per six seconds of its nominal length


def test_sigkill_loop_while_ten_nodes_drain(cluster: Cluster, admin: Api, namespace: str, run_id: str, tally: Tally,
                                            supervised: Supervisor) -> None:
    seed = int(time.time())
    print(f"random seed {seed}")
    # Two of the ten nodes were cordoned before: giving them back must leave them so.
    workload = build_workload(cluster, admin, namespace, run_id, nodes=10, spares=2, cordoned=2, scale=2)
    loop = Loop(admin, workload, supervised, tally, random.Random(seed), kill_every=(3.0, 6.0), prefix=run_id)
    with BudgetMonitor(admin, namespace, tally) as monitor:
        for node in workload.nodes:  # all ten drain at once, then the random loop takes over
            admin.create_maintenance(f"{node}-nm", node)
        tally.count("op", "create", len(workload.nodes))
        # The loop's pace follows the machine's load (each kill comes a few seconds after the operator is ready
        # again): it runs on past LOOP_SECONDS until the work and the kills asked of it below are done.
        checker = loop.run(LOOP_SECONDS, until=lambda: tally.operations["create"] >= 12 and tally.operations["delete"] >= 3
                           and supervised.kills >= KILLS)
        # The kills stopped: the operator catches up with every maintenance left, and gives every node back. Each
        # eviction the "paced" budget allows waits for the replacement before it to be ready: a round takes longer on
        # a loaded machine, so the wait lasts while the drains get on, and fails after two minutes without a change.
        settled = checker.settled(120)
        given_back = loop.clean_up(120)
    print(f"operations {dict(tally.operations)}, faults {dict(tally.faults)}, checks {checker.checks}, budget samples {monitor.samples}, "
          f"settled in {checker.seconds:.0f}s")
    assert tally.violations == [], tally.violations
    assert settled == [] and given_back == [], (settled, given_back)
    assert tally.exits == [], f"the operator exited by itself: {tally.exits}"
    # The faults and the work happened: enough kills, creations and deletions, checks after each step.
    assert supervised.kills >= KILLS, supervised.kills
    assert tally.operations["create"] >= 12 and tally.operations["delete"] >= 3, tally.operations
    assert checker.checks >= 20 and monitor.samples >= 50, (checker.checks, monitor.samples)
