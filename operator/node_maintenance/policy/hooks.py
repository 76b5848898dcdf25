"""A policy's preDrain and postMaintenance Jobs: the Job to create for one maintenance, and how it went.

Pure functions. One Job per maintenance and hook, named after the NodeMaintenance's uid so that a new
NodeMaintenance for the same node runs its hooks again, and owned by the NodeMaintenance so the garbage
collector removes it with it. The Job's own backoffLimit decides how often a failed pod is retried.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from node_maintenance.api import GROUP, KIND

PRE_DRAIN, POST_MAINTENANCE = "pre-drain", "post-maintenance"
HOOK_LABEL = f"{GROUP}/hook"
MAINTENANCE_ANNOTATION = f"{GROUP}/maintenance"
NODE_ANNOTATION = f"{GROUP}/node"
# The policy fields that declare each hook, for messages.
FIELDS = {PRE_DRAIN: "preDrain", POST_MAINTENANCE: "postMaintenance"}
RUNNING, SUCCEEDED, FAILED, MISSING = "Running", "Succeeded", "Failed", "Missing"


def job_name(hook: str, maintenance: Mapping[str, Any]) -> str:
    digest = hashlib.sha256(maintenance["metadata"]["uid"].encode()).hexdigest()[:16]
    return f"nm-{hook}-{digest}"


def build_job(hook: str, template: Mapping[str, Any], maintenance: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """The Job for ``hook`` of ``maintenance`` from the policy's jobTemplate, with NODE_NAME and
    NODE_MAINTENANCE in every container's environment."""
    meta = maintenance["metadata"]
    node_name = maintenance["spec"]["nodeName"]
    job_meta = copy.deepcopy(dict(template.get("metadata") or {}))
    spec = copy.deepcopy(dict(template.get("spec") or {}))
    pod_spec = spec.setdefault("template", {}).setdefault("spec", {})
    pod_spec.setdefault("restartPolicy", "Never")
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
class Outcome:
    state: str  # RUNNING, SUCCEEDED, FAILED or MISSING
    message: str


def outcome(hook: str, policy: str, job: Mapping[str, Any] | None, namespace: str) -> Outcome:
    """How the hook's Job stands, worded for the NodeMaintenance's status."""
    field = FIELDS[hook]
    if job is None:
        return Outcome(MISSING, f"{field} Job of NodeMaintenancePolicy {policy} is being created")
    name = f"{namespace}/{job['metadata']['name']}"
    conditions = {c.get("type"): c for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}
    if "Complete" in conditions:
        return Outcome(SUCCEEDED, f"{field} Job {name} succeeded")
    failed = conditions.get("Failed")
    if failed:
        return Outcome(FAILED, f"{field} Job {name} of NodeMaintenancePolicy {policy} failed ({failed.get('reason', '')}: "
                               f"{failed.get('message', '')}); see its pods' logs, then delete the Job to run it again")
    failures = (job.get("status") or {}).get("failed") or 0
    retry = f", {failures} failed pod(s) so far, retried up to its backoffLimit" if failures else ""
    return Outcome(RUNNING, f"{field} Job {name} of NodeMaintenancePolicy {policy} is running{retry}")
