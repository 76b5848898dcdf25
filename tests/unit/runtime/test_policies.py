"""The policies at run time against a fake API: a policy's queue read without a write; a postMaintenance Job
that would run as the operator is never created, and the maintenance keeps its node with the reason."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import kopf
import pytest

from node_maintenance.api import SERVICE_ACCOUNT
from node_maintenance.api.paths import jobs_path, nm_path
from node_maintenance.drain import node as nodes
from node_maintenance.runtime.policies import Policies
from tests.unit.builders import FakeApi, hook_template, nm_policy, runtime_nm, runtime_node


class Listed:
    """What a watch shows, in place of a Mirror."""

    def __init__(self, objects: dict[str, dict[str, Any]]) -> None:
        self.objects = objects


def test_a_queued_maintenance_is_told_to_wait_and_the_gate_writes_nothing() -> None:
    api = FakeApi()
    policies = Policies(api, "operator-ns", lambda: None)  # type: ignore[arg-type]
    policies.served = True
    policy = nm_policy("pool", generation=1, node_selector={"matchLabels": {"pool": "a"}}, maxParallel=1)
    pool = [runtime_node(f"n{i}", labels={"pool": "a"}) for i in (1, 2)]
    pool[0]["metadata"]["annotations"] = {nodes.HOLDER: "first"}
    first, second = runtime_nm("first", "n1"), runtime_nm("second", "n2", created="2026-01-01T00:01:00Z")

    policies._mirrors = {"policies": Listed({"/pool": policy}), "nodes": Listed({f"/{n['metadata']['name']}": n for n in pool}),  # type: ignore[dict-item]
                         "maintenances": Listed({"/first": first, "/second": second}), "jobs": Listed({})}
    gate = policies.gate(second, pool[1], datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC), {})
    assert gate.waiting is not None and gate.waiting.node_patch is None and not gate.waiting.removals
    queued = next(c for c in gate.waiting.status["conditions"] if c["type"] == "Queued")
    assert (queued["status"], queued["reason"]) == ("True", "WaitingForSlot")
    assert api.calls == []  # the gate only reads


def test_a_post_maintenance_job_that_would_run_as_the_operator_is_not_created_and_the_node_is_kept() -> None:
    api = FakeApi()
    policies = Policies(api, "operator-ns", lambda: None)  # type: ignore[arg-type]
    policies.served = True
    policy = nm_policy("pool", node_selector={"matchLabels": {"pool": "a"}},
                       postMaintenance={"jobTemplate": hook_template(serviceAccount=SERVICE_ACCOUNT)})
    node = runtime_node("n1", labels={"pool": "a"}, annotations={nodes.HOLDER: "m"})
    policies._mirrors = {"policies": Listed({"/pool": policy}), "nodes": Listed({"/n1": node}), "jobs": Listed({})}  # type: ignore[dict-item]
    with pytest.raises(kopf.TemporaryError) as held:
        asyncio.run(policies.before_handback(runtime_nm("m", "n1"), "v1beta1"))
    assert "spec.postMaintenance.jobTemplate.spec.template.spec.serviceAccount names the operator's ServiceAccount" in str(held.value)
    assert api.calls_to("POST", jobs_path("operator-ns")) == []
    [patch] = api.calls_to("PATCH", nm_path("m", version="v1beta1", subresource="status"))
    condition = next(c for c in patch.body["status"]["conditions"] if c["type"] == "PostMaintenance")
    assert (condition["status"], condition["reason"], condition["message"]) == ("False", "JobFailed", str(held.value))
