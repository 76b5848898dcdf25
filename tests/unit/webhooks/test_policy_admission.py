"""The admission webhook of NodeMaintenancePolicies: a hook Job template that would run as the operator's
ServiceAccount, in either spelling of the field, or a hook naming no namespace or the operator's, is refused with the
field's path and the fix; a template naming a ServiceAccount of its own, or none, in a namespace of its own, is
admitted."""

from __future__ import annotations

from typing import Any

import pytest

from node_maintenance.api import SERVICE_ACCOUNT
from node_maintenance.webhooks.server import policy_admission_response
from tests.unit.builders import nm_policy, policy_hook

OPERATOR_NAMESPACE = "nmo"


def _review(policy: dict[str, Any], operation: str = "CREATE", old: dict[str, Any] | None = None) -> dict[str, Any]:
    request = {"uid": "u-1", "operation": operation, "object": policy, **({"oldObject": old} if old is not None else {})}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def _answer(review: dict[str, Any]) -> dict[str, Any]:
    response: dict[str, Any] = policy_admission_response(review, OPERATOR_NAMESPACE)["response"]
    return response


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
@pytest.mark.parametrize("hook", ["preDrain", "postMaintenance"])
@pytest.mark.parametrize("field", ["serviceAccountName", "serviceAccount"])
def test_a_hook_that_would_run_as_the_operator_is_refused_naming_the_field_and_the_fix(operation: str, hook: str, field: str) -> None:
    spec: dict[str, Any] = {hook: policy_hook(**{field: SERVICE_ACCOUNT})}
    policy = nm_policy("rolling", **spec)
    response = _answer(_review(policy, operation))
    assert response["uid"] == "u-1" and response["allowed"] is False and response["status"]["code"] == 403
    message = response["status"]["message"]
    assert message.startswith(f"NodeMaintenancePolicy rolling: spec.{hook}.jobTemplate.spec.template.spec.{field} names the "
                              f"operator's ServiceAccount {SERVICE_ACCOUNT}")
    assert "run the hook as a ServiceAccount of its own, with only the rights the hook needs" in message


def test_every_borrowing_field_is_named_in_one_refusal() -> None:
    policy = nm_policy("rolling", preDrain=policy_hook(serviceAccountName=SERVICE_ACCOUNT, serviceAccount=SERVICE_ACCOUNT),
                       postMaintenance=policy_hook(serviceAccount=SERVICE_ACCOUNT))
    message = _answer(_review(policy))["status"]["message"]
    assert ("spec.preDrain.jobTemplate.spec.template.spec.serviceAccountName and "
            "spec.preDrain.jobTemplate.spec.template.spec.serviceAccount name the operator's ServiceAccount") in message
    assert "spec.postMaintenance.jobTemplate.spec.template.spec.serviceAccount names the operator's ServiceAccount" in message


@pytest.mark.parametrize("pod_spec", [{"serviceAccountName": "storage-admin"}, {"serviceAccount": "storage-admin"}, {}])
def test_a_hook_running_as_a_service_account_of_its_own_or_the_default_is_admitted(pod_spec: dict[str, Any]) -> None:
    policy = nm_policy("rolling", preDrain=policy_hook(**pod_spec), postMaintenance=policy_hook(**pod_spec))
    assert _answer(_review(policy)) == {"uid": "u-1", "allowed": True}


def test_only_writes_of_the_spec_are_checked_and_a_malformed_review_gets_an_answer() -> None:
    borrowing = nm_policy("rolling", preDrain=policy_hook(serviceAccountName=SERVICE_ACCOUNT))
    assert _answer(_review(borrowing, "DELETE"))["allowed"] is True  # deleting it is the way out
    assert _answer(_review(nm_policy("odd", preDrain={"namespace": "storage-hooks", "jobTemplate": {"spec": "x"}})))["allowed"] is True
    refused = _answer({"request": {"uid": "u-2"}})
    assert refused["allowed"] is False and "AdmissionReview with request.object" in refused["status"]["message"]


@pytest.mark.parametrize(
    ("window", "message"),
    [
        ({"schedule": "0 22 * * 5", "duration": "8h", "timeZone": "Mars/Olympus"},
         'NodeMaintenancePolicy rolling: spec.windows[0].timeZone: "Mars/Olympus" is not an IANA time zone; use a name such as "Europe/Berlin"'),
        ({"schedule": "0 22 * * 8", "duration": "8h"}, 'NodeMaintenancePolicy rolling: spec.windows[0].schedule: "0 22 * * 8" is not a cron schedule'),
        ({"schedule": "0 22 * * 5", "duration": "8 hours"}, 'NodeMaintenancePolicy rolling: spec.windows[0].duration: "8 hours" is not a positive Go duration'),
    ],
)
def test_a_window_that_cannot_be_read_is_refused_naming_the_field_and_the_fix(window: dict[str, Any], message: str) -> None:
    response = _answer(_review(nm_policy("rolling", windows=[window])))
    assert response["allowed"] is False and response["status"]["message"].startswith(message), response
    readable = nm_policy("rolling", windows=[{"schedule": "0 22 * * 5", "duration": "8h", "timeZone": "Europe/Berlin"}])
    assert _answer(_review(readable))["allowed"] is True


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
@pytest.mark.parametrize("hook", ["preDrain", "postMaintenance"])
@pytest.mark.parametrize(("namespace", "words"), [
    (None, ("is not set: a hook Job runs in the namespace its policy names, where the policy's author must be allowed to create Jobs; "
           "set it to such a namespace")),
    (OPERATOR_NAMESPACE, ("names the operator's namespace nmo, where a hook Job would share the operator's Secrets, pod labels and "
                         "ServiceAccounts; set it to a namespace of the hook's own, where the policy's author may create Jobs")),
])
def test_a_hook_naming_no_namespace_or_the_operator_s_is_refused_naming_the_field_and_the_fix(operation: str, hook: str, namespace: str | None,
                                                                                          words: str) -> None:
    hooks: dict[str, Any] = {hook: policy_hook(namespace)}
    response = _answer(_review(nm_policy("rolling", **hooks), operation))
    assert response["allowed"] is False and response["status"]["message"] == f"NodeMaintenancePolicy rolling: spec.{hook}.namespace {words}"


def test_a_policy_stored_before_hooks_named_a_namespace_may_change_its_metadata_but_not_its_spec() -> None:
    stored = nm_policy("rolling", preDrain=policy_hook(None))
    labelled = {**stored, "metadata": {**stored["metadata"], "labels": {"team": "storage"}}}
    assert _answer(_review(labelled, "UPDATE", stored))["allowed"] is True
    changed = nm_policy("rolling", preDrain=policy_hook(None), maxParallel=2)
    assert "spec.preDrain.namespace is not set" in _answer(_review(changed, "UPDATE", stored))["status"]["message"]
    assert _answer(_review(nm_policy("rolling", preDrain=policy_hook("storage-hooks")), "UPDATE", stored))["allowed"] is True
