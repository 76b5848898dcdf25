"""The admission webhook of NodeMaintenancePolicies: a hook Job template that would run as the operator's
ServiceAccount, in either spelling of the field, is refused with the field's path and the fix; a template
naming a ServiceAccount of its own, or none, is admitted."""

from __future__ import annotations

from typing import Any

import pytest

from node_maintenance.api import SERVICE_ACCOUNT
from node_maintenance.webhooks.server import policy_admission_response
from tests.unit.builders import hook_template, nm_policy


def _review(policy: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "operation": operation, "object": policy}}


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
@pytest.mark.parametrize("hook", ["preDrain", "postMaintenance"])
@pytest.mark.parametrize("field", ["serviceAccountName", "serviceAccount"])
def test_a_hook_that_would_run_as_the_operator_is_refused_naming_the_field_and_the_fix(operation: str, hook: str, field: str) -> None:
    spec: dict[str, Any] = {hook: {"jobTemplate": hook_template(**{field: SERVICE_ACCOUNT})}}
    policy = nm_policy("rolling", **spec)
    response = policy_admission_response(_review(policy, operation))["response"]
    assert response["uid"] == "u-1" and response["allowed"] is False and response["status"]["code"] == 403
    message = response["status"]["message"]
    assert message.startswith(f"NodeMaintenancePolicy rolling: spec.{hook}.jobTemplate.spec.template.spec.{field} names the "
                              f"operator's ServiceAccount {SERVICE_ACCOUNT}")
    assert "run the hook as a ServiceAccount of its own, with only the rights the hook needs" in message


def test_every_borrowing_field_is_named_in_one_refusal() -> None:
    policy = nm_policy("rolling", preDrain={"jobTemplate": hook_template(serviceAccountName=SERVICE_ACCOUNT, serviceAccount=SERVICE_ACCOUNT)},
                       postMaintenance={"jobTemplate": hook_template(serviceAccount=SERVICE_ACCOUNT)})
    message = policy_admission_response(_review(policy))["response"]["status"]["message"]
    assert ("spec.preDrain.jobTemplate.spec.template.spec.serviceAccountName and "
            "spec.preDrain.jobTemplate.spec.template.spec.serviceAccount name the operator's ServiceAccount") in message
    assert "spec.postMaintenance.jobTemplate.spec.template.spec.serviceAccount names the operator's ServiceAccount" in message


@pytest.mark.parametrize("pod_spec", [{"serviceAccountName": "storage-admin"}, {"serviceAccount": "storage-admin"}, {}])
def test_a_hook_running_as_a_service_account_of_its_own_or_the_default_is_admitted(pod_spec: dict[str, Any]) -> None:
    policy = nm_policy("rolling", preDrain={"jobTemplate": hook_template(**pod_spec)}, postMaintenance={"jobTemplate": hook_template(**pod_spec)})
    assert policy_admission_response(_review(policy))["response"] == {"uid": "u-1", "allowed": True}


def test_only_writes_of_the_spec_are_checked_and_a_malformed_review_gets_an_answer() -> None:
    borrowing = nm_policy("rolling", preDrain={"jobTemplate": hook_template(serviceAccountName=SERVICE_ACCOUNT)})
    assert policy_admission_response(_review(borrowing, "DELETE"))["response"]["allowed"] is True  # deleting it is the way out
    assert policy_admission_response(_review(nm_policy("odd", preDrain={"jobTemplate": {"spec": "x"}})))["response"]["allowed"] is True
    refused = policy_admission_response({"request": {"uid": "u-2"}})["response"]
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
    response = policy_admission_response(_review(nm_policy("rolling", windows=[window])))["response"]
    assert response["allowed"] is False and response["status"]["message"].startswith(message), response
    readable = nm_policy("rolling", windows=[{"schedule": "0 22 * * 5", "duration": "8h", "timeZone": "Europe/Berlin"}])
    assert policy_admission_response(_review(readable))["response"]["allowed"] is True
