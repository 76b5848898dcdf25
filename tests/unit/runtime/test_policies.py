"""The policies at run time against a fake API: a policy's queue read without a write."""

from __future__ import annotations

import datetime
from typing import Any

from node_maintenance.drain import node as nodes
from node_maintenance.runtime.policies import Policies
from tests.unit.builders import FakeApi, nm_policy, runtime_nm, runtime_node


def test_a_queued_maintenance_is_told_to_wait_and_the_gate_writes_nothing() -> None:
    api = FakeApi()
    policies = Policies(api, "operator-ns", lambda: None)  # type: ignore[arg-type]
    policies.served = True
    policy = nm_policy("pool", generation=1, node_selector={"matchLabels": {"pool": "a"}}, maxParallel=1)
    pool = [runtime_node(f"n{i}", labels={"pool": "a"}) for i in (1, 2)]
    pool[0]["metadata"]["annotations"] = {nodes.HOLDER: "first"}
    first, second = runtime_nm("first", "n1"), runtime_nm("second", "n2", created="2026-01-01T00:01:00Z")

    class Listed:
        def __init__(self, objects: dict[str, dict[str, Any]]) -> None:
            self.objects = objects

    policies._mirrors = {"policies": Listed({"/pool": policy}), "nodes": Listed({f"/{n['metadata']['name']}": n for n in pool}),  # type: ignore[dict-item]
                         "maintenances": Listed({"/first": first, "/second": second}), "jobs": Listed({})}
    gate = policies.gate(second, pool[1], datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC), {})
    assert gate.waiting is not None and gate.waiting.node_patch is None and not gate.waiting.removals
    queued = next(c for c in gate.waiting.status["conditions"] if c["type"] == "Queued")
    assert (queued["status"], queued["reason"]) == ("True", "WaitingForSlot")
    assert api.calls == []  # the gate only reads
