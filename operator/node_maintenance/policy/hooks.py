"""A policy's preDrain and postMaintenance Jobs: the Job to create for one maintenance, and how it went.

Pure functions. One Job per maintenance and hook, named after the NodeMaintenance's uid so that a new
NodeMaintenance for the same node runs its hooks again, and owned by the NodeMaintenance so the garbage
collector removes it with it. The Job's own backoffLimit decides how often a failed pod is retried.

The Job runs in the namespace the hook names, where its author must be allowed to create Jobs (the admission
webhook asks). Never in the operator's own namespace: a pod there could mount the operator's serving Secret, carry
its pod labels (and get a share of its webhooks' traffic) or run as its ServiceAccounts; nor as the operator's own
ServiceAccount, whose cluster-wide rights it would hand to whoever may write a policy. Such a hook, or one naming no
namespace (stored before the field existed), is refused by the admission webhook and, for a policy stored before it
or past it, here: its Job is never built.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from node_maintenance.api import GROUP, KIND, SERVICE_ACCOUNT

PRE_DRAIN, POST_MAINTENANCE = "pre-drain", "post-maintenance"
HOOK_LABEL = f"{GROUP}/hook"
MAINTENANCE_ANNOTATION = f"{GROUP}/maintenance"
NODE_ANNOTATION = f"{GROUP}/node"
# The policy fields that declare each hook, for messages.
FIELDS = {PRE_DRAIN: "preDrain", POST_MAINTENANCE: "postMaintenance"}
# The pod spec fields naming the ServiceAccount a pod runs as: serviceAccount is the deprecated spelling,
# which the API server still honours.
SERVICE_ACCOUNT_FIELDS = ("serviceAccountName", "serviceAccount")


class JobState(StrEnum):
    """How a hook's Job stands."""

    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    MISSING = "Missing"  # not created yet


def job_name(hook: str, maintenance: Mapping[str, Any]) -> str:
    digest = hashlib.sha256(maintenance["metadata"]["uid"].encode()).hexdigest()[:16]
    return f"nm-{hook}-{digest}"


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` if it is an object, else an empty one: the schema leaves a jobTemplate's inside unchecked, and the
    webhook may be sent anything."""
    return value if isinstance(value, Mapping) else {}


def templates(spec: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The jobTemplate of each hook a policy's spec declares."""
    declared = {hook: _mapping(spec.get(field)).get("jobTemplate") for hook, field in FIELDS.items()}
    return {hook: template for hook, template in declared.items() if isinstance(template, Mapping)}


def namespaces(spec: Mapping[str, Any]) -> dict[str, str]:
    """The namespace each hook a policy's spec declares names for its Job ("" when it names none)."""
    named = {hook: _mapping(spec.get(field)).get("namespace") for hook, field in FIELDS.items() if hook in templates(spec)}
    return {hook: namespace if isinstance(namespace, str) else "" for hook, namespace in named.items()}


def misplaced(hook: str, namespace: str, operator_namespace: str) -> str:
    """Why ``hook``'s Job may not run in ``namespace`` (the one its policy names), naming the field and the fix; empty
    when it may. A hook naming none was stored before the field existed: where it would run, nobody was asked."""
    field = f"spec.{FIELDS[hook]}.namespace"
    if not namespace:
        return (f"{field} is not set: a hook Job runs in the namespace its policy names, where the policy's author must be "
                "allowed to create Jobs; set it to such a namespace")
    if namespace == operator_namespace:
        return (f"{field} names the operator's namespace {namespace}, where a hook Job would share the operator's Secrets, "
                "pod labels and ServiceAccounts; set it to a namespace of the hook's own, where the policy's author may create Jobs")
    return ""


def misplacements(hook_namespaces: Mapping[str, str], operator_namespace: str) -> tuple[str, ...]:
    """:func:`misplaced` of each hook that is."""
    return tuple(reason for hook, namespace in hook_namespaces.items() if (reason := misplaced(hook, namespace, operator_namespace)))


def borrowed_identity(hook: str, template: Mapping[str, Any]) -> str:
    """Why ``hook``'s Job may not be built from ``template``: its pod would run as the operator's ServiceAccount,
    naming the field and the fix; empty when it names another ServiceAccount or none."""
    pod_spec = _mapping(_mapping(_mapping(template.get("spec")).get("template")).get("spec"))
    paths = [f"spec.{FIELDS[hook]}.jobTemplate.spec.template.spec.{name}" for name in SERVICE_ACCOUNT_FIELDS
             if pod_spec.get(name) == SERVICE_ACCOUNT]
    if not paths:
        return ""
    return (f"{' and '.join(paths)} {'name' if len(paths) > 1 else 'names'} the operator's ServiceAccount {SERVICE_ACCOUNT}, whose "
            "cluster-wide rights a hook Job must not borrow; run the hook as a ServiceAccount of its own, with only the rights the hook needs")


def borrowed_identities(hook_templates: Mapping[str, Mapping[str, Any]]) -> tuple[str, ...]:
    """:func:`borrowed_identity` of each hook that has one."""
    return tuple(reason for hook, template in hook_templates.items() if (reason := borrowed_identity(hook, template)))


def build_job(hook: str, template: Mapping[str, Any], maintenance: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """The Job for ``hook`` of ``maintenance`` from the policy's jobTemplate, with NODE_NAME and
    NODE_MAINTENANCE in every container's environment. Its pod gets no API token unless the template
    asks for one: most hooks never call the API, and a token is a credential anyone reading the pod's
    files could use."""
    meta = maintenance["metadata"]
    node_name = maintenance["spec"]["nodeName"]
    job_meta = copy.deepcopy(dict(template.get("metadata") or {}))
    spec = copy.deepcopy(dict(template.get("spec") or {}))
    pod_spec = spec.setdefault("template", {}).setdefault("spec", {})
    pod_spec.setdefault("restartPolicy", "Never")
    if pod_spec.get("automountServiceAccountToken") is None:
        pod_spec["automountServiceAccountToken"] = False
    env = [{"name": "NODE_NAME", "value": node_name}, {"name": "NODE_MAINTENANCE", "value": meta["name"]}]
    for container in [*pod_spec.get("initContainers", []), *pod_spec.get("containers", [])]:
        container["env"] = [*env, *(e for e in container.get("env", []) if e.get("name") not in ("NODE_NAME", "NODE_MAINTENANCE"))]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(hook, maintenance),
            "namespace": namespace,
            "labels": {**(job_meta.get("labels") or {}), HOOK_LABEL: hook},
            "annotations": {**(job_meta.get("annotations") or {}), MAINTENANCE_ANNOTATION: meta["name"], NODE_ANNOTATION: node_name},
            "ownerReferences": [{"apiVersion": f"{GROUP}/v1beta1", "kind": KIND, "name": meta["name"], "uid": meta["uid"]}],
        },
        "spec": spec,
    }


@dataclass(frozen=True)
class JobOutcome:
    """How a hook's Job stands, worded for the NodeMaintenance's status."""

    state: JobState
    message: str


@dataclass(frozen=True)
class JobStep:
    """How a hook stands, and the Job to create for it (None: it exists, or it must not be created)."""

    outcome: JobOutcome
    create: dict[str, Any] | None = None


def assess(hook: str, policy: str, template: Mapping[str, Any], maintenance: Mapping[str, Any], job: Mapping[str, Any] | None,
           namespace: str, operator_namespace: str, refused: str = "") -> JobStep:
    """The hook's outcome and the Job to create in ``namespace``, the hook's. A hook naming no namespace or the
    operator's, or a template borrowing the operator's identity, fails the hook and builds no Job; a Job the API
    refused at the last try (``refused``) is a failure, tried again."""
    borrowed = misplaced(hook, namespace, operator_namespace) or borrowed_identity(hook, template)
    if borrowed:
        return JobStep(outcome=JobOutcome(state=JobState.FAILED,
                                          message=f"the {FIELDS[hook]} Job of NodeMaintenancePolicy {policy} is not created: {borrowed}"))
    if job is not None:
        return JobStep(outcome=outcome(hook, policy, job, namespace))
    missing = JobOutcome(state=JobState.FAILED, message=refusal(hook, policy, refused)) if refused else outcome(hook, policy, None, namespace)
    return JobStep(outcome=missing, create=build_job(hook, template, maintenance, namespace))


def refusal(hook: str, policy: str, error: str) -> str:
    """The API refused to create the hook's Job: ``error`` says why, the field to fix is the template."""
    return f"the {FIELDS[hook]} Job of NodeMaintenancePolicy {policy} was refused: {error}; fix spec.{FIELDS[hook]}.jobTemplate"


def outcome(hook: str, policy: str, job: Mapping[str, Any] | None, namespace: str) -> JobOutcome:
    """How the hook's Job stands, worded for the NodeMaintenance's status."""
    field = FIELDS[hook]
    if job is None:
        return JobOutcome(state=JobState.MISSING, message=f"{field} Job of NodeMaintenancePolicy {policy} is being created")
    name = f"{namespace}/{job['metadata']['name']}"
    conditions = {c.get("type"): c for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}
    if "Complete" in conditions:
        return JobOutcome(state=JobState.SUCCEEDED, message=f"{field} Job {name} succeeded")
    failed = conditions.get("Failed")
    if failed:
        return JobOutcome(state=JobState.FAILED, message=f"{field} Job {name} of NodeMaintenancePolicy {policy} failed ({failed.get('reason', '')}: "
                                                         f"{failed.get('message', '')}); see its pods' logs, then delete the Job to run it again")
    failures = (job.get("status") or {}).get("failed") or 0
    retry = f", {failures} failed pod(s) so far, retried up to its backoffLimit" if failures else ""
    return JobOutcome(state=JobState.RUNNING, message=f"{field} Job {name} of NodeMaintenancePolicy {policy} is running{retry}")
