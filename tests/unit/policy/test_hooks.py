"""The hook Jobs of a NodeMaintenancePolicy: how each is built for a NodeMaintenance, what its state says, and
that none is built to run as the operator's ServiceAccount, whose failed hook holds the maintenance instead."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from node_maintenance.api import SERVICE_ACCOUNT
from node_maintenance.policy import hooks, model, terms
from node_maintenance.policy.verdicts import Verdict, VerdictKind
from tests.unit.builders import HELD, NOW, hook_template, nm, nm_policy, seen_by_policies

NM = nm("worker-3", "worker-3", uid="1234")
TEMPLATE: dict[str, Any] = {
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
        (None, hooks.JobState.MISSING, "being created"),
        (_job([]), hooks.JobState.RUNNING, "nmo/j of NodeMaintenancePolicy p is running"),
        (_job([], failed=1), hooks.JobState.RUNNING, "1 failed pod(s) so far, retried up to its backoffLimit"),
        (_job([{"type": "Complete", "status": "True"}]), hooks.JobState.SUCCEEDED, "succeeded"),
        (_job([{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}], 3),
         hooks.JobState.FAILED,
         "failed (BackoffLimitExceeded: Job has reached the specified backoff limit); see its pods' logs, then delete the Job"),
        (_job([{"type": "Failed", "status": "False"}]), hooks.JobState.RUNNING, "running"),
    ],
)
def test_hook_outcomes(job: dict[str, Any] | None, state: str, words: str) -> None:
    outcome = hooks.outcome(hooks.PRE_DRAIN, "p", job, "nmo")
    assert outcome.state == state and words in outcome.message and outcome.message.startswith("preDrain Job")


@pytest.mark.parametrize(("template", "automount"), [
    (hook_template(), False),
    (hook_template(automountServiceAccountToken=True), True),
    (hook_template(automountServiceAccountToken=False), False),
])
def test_a_hook_pod_gets_an_api_token_only_when_its_template_asks(template: dict[str, Any], automount: bool) -> None:
    job = hooks.build_job(hooks.POST_MAINTENANCE, template, NM, "nmo")
    assert job["spec"]["template"]["spec"]["automountServiceAccountToken"] is automount


@pytest.mark.parametrize("hook", [hooks.PRE_DRAIN, hooks.POST_MAINTENANCE])
@pytest.mark.parametrize("field", ["serviceAccountName", "serviceAccount"])
def test_no_job_is_built_to_run_as_the_operator_and_the_hook_fails_naming_the_field(hook: str, field: str) -> None:
    for job in (None, _job([{"type": "Complete", "status": "True"}])):  # one made before the refusal counts for nothing
        step = hooks.assess(hook, "rolling", hook_template(**{field: SERVICE_ACCOUNT}), NM, job, "nmo")
        assert step.create is None and step.outcome.state == hooks.JobState.FAILED
        message = step.outcome.message
        assert message.startswith(f"the {hooks.FIELDS[hook]} Job of NodeMaintenancePolicy rolling is not created: ")
        assert f"spec.{hooks.FIELDS[hook]}.jobTemplate.spec.template.spec.{field} names the operator's ServiceAccount {SERVICE_ACCOUNT}" in message
        assert "run the hook as a ServiceAccount of its own" in message


def test_a_job_running_as_its_own_service_account_is_built_until_it_exists() -> None:
    template = hook_template(serviceAccountName="storage-admin")
    step = hooks.assess(hooks.PRE_DRAIN, "rolling", template, NM, None, "nmo")
    assert step.outcome.state == hooks.JobState.MISSING and step.create is not None
    assert step.create["spec"]["template"]["spec"]["serviceAccountName"] == "storage-admin"
    assert hooks.assess(hooks.PRE_DRAIN, "rolling", template, NM, _job([]), "nmo") == hooks.JobStep(hooks.outcome(hooks.PRE_DRAIN, "rolling", _job([]), "nmo"))
    refused = hooks.assess(hooks.PRE_DRAIN, "rolling", template, NM, None, "nmo", refused="forbidden")
    assert refused.outcome.state == hooks.JobState.FAILED and "was refused: forbidden" in refused.outcome.message and refused.create is not None


def test_a_pre_drain_job_that_would_run_as_the_operator_holds_the_maintenance_with_the_reason() -> None:
    policy = model.Policy.of(nm_policy("rolling", preDrain={"jobTemplate": hook_template(serviceAccount=SERVICE_ACCOUNT)}))
    known = seen_by_policies(HELD, Verdict(VerdictKind.ADMITTED, policy))
    step = terms.maintenance(nm("nm", "n1", uid="1234", status={}), known, {}, NOW).terms
    assert step.jobs == () and step.hold_failed
    pre_drain = next(c for c in step.conditions if c.type == "PreDrain")
    assert (pre_drain.status, pre_drain.reason, pre_drain.message) == ("False", "JobFailed", step.hold)
    assert "spec.preDrain.jobTemplate.spec.template.spec.serviceAccount names the operator's ServiceAccount" in step.hold
    # The same policy with a ServiceAccount of its own creates the Job and waits for it.
    fixed = dataclasses.replace(policy, pre_drain=hook_template(serviceAccount="storage-admin"))
    step = terms.maintenance(nm("nm", "n1", uid="1234", status={}), dataclasses.replace(known, verdict=Verdict(VerdictKind.ADMITTED, fixed)), {}, NOW).terms
    assert len(step.jobs) == 1 and not step.hold_failed
