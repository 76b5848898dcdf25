"""The hook Jobs of a NodeMaintenancePolicy: how each is built for a NodeMaintenance in the namespace its hook names,
what its state says, and that none is built to run as the operator's ServiceAccount, in the operator's namespace or
for a hook naming no namespace: that hook fails and holds the maintenance instead."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from node_maintenance.api import SERVICE_ACCOUNT
from node_maintenance.policy import hooks, line, model, policy_status, terms
from node_maintenance.policy.verdicts import Verdict, VerdictKind
from tests.unit.builders import HELD, NOW, hook_template, nm, nm_policy, policy_hook, seen_by_policies

NM = nm("worker-3", "worker-3", uid="1234")
TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"team": "storage"}},
    "spec": {"backoffLimit": 2, "template": {"spec": {"containers": [{"name": "c", "image": "tools:1", "env": [{"name": "NODE_NAME", "value": "stale"}, {"name": "X", "value": "1"}]}]}}},
}


def test_a_hook_job_runs_in_its_hook_s_namespace_with_the_node_name_and_belongs_to_the_maintenance() -> None:
    job = hooks.assess(hooks.PRE_DRAIN, "rolling", TEMPLATE, NM, None, "storage-hooks", "nmo").create
    assert job is not None and job["metadata"]["namespace"] == "storage-hooks" and job["metadata"]["name"] == hooks.job_name(hooks.PRE_DRAIN, NM)
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
    job = hooks.build_job(hooks.POST_MAINTENANCE, template, NM, "storage-hooks")
    assert job["spec"]["template"]["spec"]["automountServiceAccountToken"] is automount


@pytest.mark.parametrize("hook", [hooks.PRE_DRAIN, hooks.POST_MAINTENANCE])
@pytest.mark.parametrize("field", ["serviceAccountName", "serviceAccount"])
def test_no_job_is_built_to_run_as_the_operator_and_the_hook_fails_naming_the_field(hook: str, field: str) -> None:
    for job in (None, _job([{"type": "Complete", "status": "True"}])):  # one made before the refusal counts for nothing
        step = hooks.assess(hook, "rolling", hook_template(**{field: SERVICE_ACCOUNT}), NM, job, "storage-hooks", "nmo")
        assert step.create is None and step.outcome.state == hooks.JobState.FAILED
        message = step.outcome.message
        assert message.startswith(f"the {hooks.FIELDS[hook]} Job of NodeMaintenancePolicy rolling is not created: ")
        assert f"spec.{hooks.FIELDS[hook]}.jobTemplate.spec.template.spec.{field} names the operator's ServiceAccount {SERVICE_ACCOUNT}" in message
        assert "run the hook as a ServiceAccount of its own" in message


def test_a_job_running_as_its_own_service_account_is_built_until_it_exists() -> None:
    template = hook_template(serviceAccountName="storage-admin")
    step = hooks.assess(hooks.PRE_DRAIN, "rolling", template, NM, None, "storage-hooks", "nmo")
    assert step.outcome.state == hooks.JobState.MISSING and step.create is not None
    assert step.create["spec"]["template"]["spec"]["serviceAccountName"] == "storage-admin"
    assert (hooks.assess(hooks.PRE_DRAIN, "rolling", template, NM, _job([]), "storage-hooks", "nmo")
            == hooks.JobStep(hooks.outcome(hooks.PRE_DRAIN, "rolling", _job([]), "storage-hooks")))
    refused = hooks.assess(hooks.PRE_DRAIN, "rolling", template, NM, None, "storage-hooks", "nmo", refused="forbidden")
    assert refused.outcome.state == hooks.JobState.FAILED and "was refused: forbidden" in refused.outcome.message and refused.create is not None


def test_a_pre_drain_job_that_would_run_as_the_operator_holds_the_maintenance_with_the_reason() -> None:
    policy = model.Policy.of(nm_policy("rolling", preDrain=policy_hook(serviceAccount=SERVICE_ACCOUNT)))
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


@pytest.mark.parametrize("hook", [hooks.PRE_DRAIN, hooks.POST_MAINTENANCE])
@pytest.mark.parametrize(("namespace", "words"), [
    ("", ("is not set: a hook Job runs in the namespace its policy names, where the policy's author must be allowed to create Jobs; "
         "set it to such a namespace")),
    ("nmo", ("names the operator's namespace nmo, where a hook Job would share the operator's Secrets, pod labels and ServiceAccounts; "
            "set it to a namespace of the hook's own, where the policy's author may create Jobs")),
])
def test_no_job_is_built_for_a_hook_without_a_namespace_or_in_the_operator_s(hook: str, namespace: str, words: str) -> None:
    for job in (None, _job([{"type": "Complete", "status": "True"}])):  # one made before counts for nothing
        step = hooks.assess(hook, "rolling", hook_template(), NM, job, namespace, "nmo")
        assert step.create is None and step.outcome.state == hooks.JobState.FAILED
        assert step.outcome.message == f"the {hooks.FIELDS[hook]} Job of NodeMaintenancePolicy rolling is not created: spec.{hooks.FIELDS[hook]}.namespace {words}"


@pytest.mark.parametrize("hook_namespace", [None, "nmo"])
def test_a_pre_drain_hook_stored_without_a_namespace_or_in_the_operator_s_holds_the_maintenance_and_its_policy_says_why(
        hook_namespace: str | None) -> None:
    policy = model.Policy.of(nm_policy("rolling", preDrain=policy_hook(hook_namespace)))
    known = seen_by_policies(HELD, Verdict(VerdictKind.ADMITTED, policy), operator_namespace="nmo")
    step = terms.maintenance(nm("nm", "n1", uid="1234", status={}), known, {}, NOW).terms
    assert step.jobs == () and step.hold_failed and "spec.preDrain.namespace" in step.hold
    pre_drain = next(c for c in step.conditions if c.type == "PreDrain")
    assert (pre_drain.status, pre_drain.reason, pre_drain.message) == ("False", "JobFailed", step.hold)
    summary = line.decide([policy], [], [], now=NOW, operator_namespace="nmo").summaries["rolling"]
    condition = next(c for c in policy_status.policy_status({}, summary, 1, "2026-01-01T12:00:00Z")["conditions"]
                     if c["type"] == policy_status.MISPLACED_HOOKS)
    assert (condition["status"], condition["reason"]) == ("True", "NoNamespaceOfTheirOwn")
    assert condition["message"].startswith("spec.preDrain.namespace ") and condition["message"].endswith("the maintenances needing it hold")
    # Named a namespace of its own, the hook's Job is created there and waited for; the policy says all is well.
    fixed = model.Policy.of(nm_policy("rolling", preDrain=policy_hook("storage-hooks")))
    step = terms.maintenance(nm("nm", "n1", uid="1234", status={}), dataclasses.replace(known, verdict=Verdict(VerdictKind.ADMITTED, fixed)), {}, NOW).terms
    assert [job["metadata"]["namespace"] for job in step.jobs] == ["storage-hooks"] and not step.hold_failed
    summary = line.decide([fixed], [], [], now=NOW, operator_namespace="nmo").summaries["rolling"]
    condition = next(c for c in policy_status.policy_status({}, summary, 1, "2026-01-01T12:00:00Z")["conditions"]
                     if c["type"] == policy_status.MISPLACED_HOOKS)
    assert (condition["status"], condition["reason"]) == ("False", "OwnNamespaces")
