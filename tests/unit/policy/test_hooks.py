"""The hook Jobs of a NodeMaintenancePolicy: how each is built for a NodeMaintenance, and what its state says."""

from __future__ import annotations

from typing import Any

import pytest

from node_maintenance.policy import hooks
from tests.unit.builders import nm

NM = nm("worker-3", "worker-3", uid="1234")
TEMPLATE = {
    "metadata": {"labels": {"team": "storage"}},
    "spec": {"backoffLimit": 2, "template": {"spec": {"containers": [{"name": "c", "image": "tools:1", "env": [{"name": "NODE_NAME", "value": "stale"}, {"name": "X", "value": "1"}]}]}}},
}


def test_a_hook_job_runs_in_our_namespace_with_the_node_name_and_belongs_to_the_maintenance() -> None:
    job = hooks.build_job(hooks.PRE_DRAIN, TEMPLATE, NM, "nmo")
    assert job["metadata"]["namespace"] == "nmo" and job["metadata"]["name"] == hooks.job_name(hooks.PRE_DRAIN, NM)
    assert len(job["metadata"]["name"]) <= 63 and job["metadata"]["name"] != hooks.job_name(hooks.POST_MAINTENANCE, NM)
    assert job["metadata"]["labels"] == {"team": "storage", hooks.HOOK_LABEL: "pre-drain"}
    assert job["metadata"]["ownerReferences"][0]["uid"] == "1234"
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 2
    assert pod["containers"][0]["env"] == [{"name": "NODE_NAME", "value": "worker-3"}, {"name": "NODE_MAINTENANCE", "value": "worker-3"},
                                           {"name": "X", "value": "1"}]
    assert TEMPLATE["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] == "stale"  # the policy is not changed


def _job(conditions: list[dict[str, str]], failed: int = 0) -> dict[str, Any]:
    return {"metadata": {"name": "j"}, "status": {"conditions": conditions, "failed": failed}}


@pytest.mark.parametrize(
    ("job", "state", "words"),
    [
        (None, hooks.MISSING, "being created"),
        (_job([]), hooks.RUNNING, "nmo/j of NodeMaintenancePolicy p is running"),
        (_job([], failed=1), hooks.RUNNING, "1 failed pod(s) so far, retried up to its backoffLimit"),
        (_job([{"type": "Complete", "status": "True"}]), hooks.SUCCEEDED, "succeeded"),
        (_job([{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}], 3),
         hooks.FAILED, "failed (BackoffLimitExceeded: Job has reached the specified backoff limit); see its pods' logs, then delete the Job"),
        (_job([{"type": "Failed", "status": "False"}]), hooks.RUNNING, "running"),
    ],
)
def test_hook_outcomes(job: dict[str, Any] | None, state: str, words: str) -> None:
    outcome = hooks.outcome(hooks.PRE_DRAIN, "p", job, "nmo")
    assert outcome.state == state and words in outcome.message and outcome.message.startswith("preDrain Job")
