"""Giving the node back when a NodeMaintenance is deleted (the drain itself is ``engine``'s job): the postMaintenance
Job of the policy governing the node first, then, under waitForHealthy, the node recorded as recovering in its policy's
status (:func:`recovering`, which onTimeout HandBack goes through too); then read the node, decide
(:func:`drain.handback.hand_back`), carry it out; a node that changed meanwhile is read again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from node_maintenance.api import timestamps
from node_maintenance.api.conditions import Condition
from node_maintenance.api.paths import node_path
from node_maintenance.client.errors import KubeError
from node_maintenance.client.protocol import KubeApi
from node_maintenance.drain import status
from node_maintenance.drain.handback import hand_back
from node_maintenance.policy import hooks, model, verdicts, wording
from node_maintenance.policy.terms import HOOK_RECHECK_SECONDS
from node_maintenance.runtime import metrics
from node_maintenance.runtime.executor import EventSink, Executor
from node_maintenance.runtime.leases import LeaseKeeper
from node_maintenance.runtime.policies.discovery import CRD_CHECK_SECONDS
from node_maintenance.runtime.policies.view import Policies


class Later(Exception):
    """The node is given back later: the hand-back is tried again after ``delay`` seconds."""

    def __init__(self, why: str, delay: float) -> None:
        super().__init__(why)
        self.delay = delay


def executor(kube: KubeApi, body: dict[str, Any], version: str, event: EventSink, log: logging.LoggerAdapter[logging.Logger],
             lease_namespace: str = "") -> Executor:
    """What carries out the hand-back of ``body`` (and a policy's hook before it); the node's remediation Lease is held
    in ``lease_namespace`` (empty: none)."""
    lease = LeaseKeeper(kube, lease_namespace, body["spec"]["nodeName"]) if lease_namespace else None
    return Executor(kube, body, version, event, log, lease)


async def end(kube: KubeApi, body: dict[str, Any], executor: Executor, active: metrics.Active) -> None:
    """Give back the node ``body`` holds, through ``executor``."""
    name, node_name = body["metadata"]["name"], body["spec"]["nodeName"]
    active.holding(name, False)
    while True:
        node = await kube.get(node_path(node_name))
        if await executor.hand_back(hand_back(name, node_name, node, executor.lease is not None), node):
            return


async def before(policies: Policies, body: Mapping[str, Any], executor: Executor) -> None:
    """Run the postMaintenance Job of the policy governing the node before it is given back; raises
    Later (called again after its delay) until it has succeeded. A NodeMaintenance that never
    held its node (one still waiting) runs nothing. While the policies are not known, it waits for them.
    ``executor`` (the hand-back's) creates the Job and records the hook's condition."""
    if why := policies.unknown():
        raise Later(f"the node is given back once NodeMaintenancePolicies are read: {why}", delay=CRD_CHECK_SECONDS)
    if not policies.served:
        return
    governing = policies.governing(body["spec"]["nodeName"], body["metadata"]["name"])
    if not governing:
        return
    if len(governing) > 1:
        names = tuple(sorted(p.name for p in governing))
        message = wording.message(verdicts.Verdict(verdicts.VerdictKind.CONFLICT, policies=names), body["spec"]["nodeName"])
        await _note(body, executor, Condition(wording.HOOK_CONDITIONS[hooks.POST_MAINTENANCE], "False", model.QueuedReason.POLICY_CONFLICT, message))
        raise Later(message, delay=HOOK_RECHECK_SECONDS[hooks.JobState.FAILED])
    policy = governing[0]
    if policy.post_maintenance is not None:
        outcome = await _hook(policies, policy.post_maintenance, policy, body, executor)
        await _note(body, executor, wording.hook_condition(hooks.POST_MAINTENANCE, outcome))
        if outcome.state != hooks.JobState.SUCCEEDED:
            raise Later(outcome.message, delay=HOOK_RECHECK_SECONDS[outcome.state])
    if why := await recovering(policies, body):
        raise Later(why, delay=HOOK_RECHECK_SECONDS[hooks.JobState.FAILED])


async def recovering(policies: Policies, body: Mapping[str, Any]) -> str:
    """Why the node ``body`` holds is not given back yet ("" once it may be). Under the waitForHealthy of a policy
    governing it, the node keeps its slot until the workloads evicted from it (its status.evictedWorkloads) are healthy:
    its policy's status records it as recovering first (a restart keeps it). A deletion and onTimeout HandBack give the
    node back alike; once given back, the node is no longer held and a later deletion records nothing again (the wait's
    clock runs on from the hand-back)."""
    if why := policies.unknown():
        return f"the node is given back once NodeMaintenancePolicies are read: {why}"
    node_name, stored = body["spec"]["nodeName"], body.get("status") or {}
    taken = timestamps.parse(stored["drainStartTime"]) if stored.get("drainStartTime") else None
    for policy in policies.governing(node_name, body["metadata"]["name"]) or ():
        if policy.wait_for_healthy:
            try:
                await policies.recover(policy.name, node_name, stored.get("evictedWorkloads") or (), taken)
            except KubeError as error:
                return f"the node is given back once NodeMaintenancePolicy {policy.name} records it as recovering: {error}"
    return ""


async def _hook(policies: Policies, template: Mapping[str, Any], policy: model.Policy, body: Mapping[str, Any], executor: Executor) -> hooks.JobOutcome:
    """The postMaintenance Job's outcome, the executor creating the Job when there is none yet (and the template may have one)."""
    namespace = policy.hook_namespace(hooks.POST_MAINTENANCE)
    job = policies.job(namespace, hooks.job_name(hooks.POST_MAINTENANCE, body))
    step = hooks.assess(hooks.POST_MAINTENANCE, policy.name, template, body, job, namespace, policies.namespace)
    if step.create is None:
        return step.outcome
    refused = await executor.create_job(step.create)
    if refused:  # a template the API refuses: say which field to fix
        return hooks.JobOutcome(hooks.JobState.FAILED, hooks.refusal(hooks.POST_MAINTENANCE, policy.name, refused))
    return hooks.outcome(hooks.POST_MAINTENANCE, policy.name, step.create, namespace)


async def _note(body: Mapping[str, Any], executor: Executor, condition: Condition) -> None:
    """Record a hook's condition on a NodeMaintenance being deleted (its drain engine has stopped)."""
    fields = status.noted(body.get("status") or {}, condition, generation=body["metadata"].get("generation", 1),
                          now=timestamps.rfc3339(timestamps.now()))
    if fields is not None:
        await executor.note(fields, body["metadata"]["resourceVersion"])
