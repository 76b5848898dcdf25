"""NodeMaintenancePolicies at run time: watches what the policy decisions read, serves each drain
engine its verdict, creates hook Jobs and writes the policies' status.

Releases before 0.4.0 install no policy CRD, and their RBAC grants nothing on policies or Jobs, so
nothing here runs (and every drain goes on as before) until the CRD is served; it is looked for every
few seconds, since an upgrade installs it while the operator runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from collections.abc import Callable, Mapping
from typing import Any

import kopf

from node_maintenance.api import conditions as cond
from node_maintenance.api import timestamps
from node_maintenance.api.conditions import Condition
from node_maintenance.api.paths import POLICY_CRD, POLICY_VERSION, jobs_path, nm_path, node_path, policy_path
from node_maintenance.client.errors import ApiError, Conflict
from node_maintenance.client.http import AsyncKube
from node_maintenance.client.watch import Mirror
from node_maintenance.drain import node as nodes
from node_maintenance.policy import decide as pol
from node_maintenance.policy import hooks
from node_maintenance.policy.gate import HOOK_RECHECK_SECONDS, Gate, Seen, gate

CRD_CHECK_SECONDS = 5.0
SYNC_TIMEOUT_SECONDS = 30.0
POLICY_STATUS_INTERVAL_SECONDS = 1.0
log = logging.getLogger(__name__)


class Policies:
    def __init__(self, kube: AsyncKube, namespace: str, on_change: Callable[[], None]) -> None:
        self.kube = kube
        self.namespace = namespace  # where hook Jobs run: the operator's own
        self.on_change = on_change
        self.ready = asyncio.Event()  # set once it is known whether policies apply, and they are read
        self.served = False
        self._mirrors: dict[str, Mirror] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._decision: pol.Decision | None = None
        self._written: dict[str, dict[str, Any]] = {}
        self._dirty = asyncio.Event()
        self._unreadable = False  # the CRD could not be read at the last look (said once, not every look)

    # ----------------------------------------------------------------- lifecycle
    async def run(self) -> None:
        try:
            while True:
                try:
                    served = await self._crd_served()
                    if served and not self.served:
                        await self._start()
                    elif not served and self.served:
                        await self._stop()
                        self.on_change()
                except Exception as error:  # the API briefly away: decide at the next look
                    log.warning("looking for NodeMaintenancePolicies failed: %s", str(error) or type(error).__name__)
                self.ready.set()  # drains wait for the first look only, whatever it found
                await asyncio.sleep(CRD_CHECK_SECONDS)
        finally:
            await self._stop()

    async def _crd_served(self) -> bool:
        try:
            crd = await self.kube.get(POLICY_CRD)
        except ApiError as error:  # e.g. RBAC without access to CRDs: policies stay off
            if not self._unreadable:
                log.warning("cannot read the NodeMaintenancePolicy CRD; policies are off: %s", error)
            self._unreadable = True
            return False
        self._unreadable = False
        if crd is None:
            return False
        established = any(c.get("type") == "Established" and c.get("status") == "True" for c in (crd.get("status") or {}).get("conditions") or [])
        return established and any(v["name"] == POLICY_VERSION and v.get("served") for v in crd["spec"]["versions"])

    async def _start(self) -> None:
        self._mirrors = {
            "policies": Mirror(self.kube, policy_path(), self._changed),
            "nodes": Mirror(self.kube, node_path(), self._changed, slim=pol.slim_node),
            "maintenances": Mirror(self.kube, nm_path(), self._changed, slim=pol.slim_maintenance),
            "jobs": Mirror(self.kube, jobs_path(self.namespace), self._changed),
        }
        self._tasks = [asyncio.create_task(m.run(), name=f"policy {k} watch") for k, m in self._mirrors.items()]
        try:
            await asyncio.wait_for(asyncio.gather(*(m.synced.wait() for m in self._mirrors.values())), SYNC_TIMEOUT_SECONDS)
        except TimeoutError:  # e.g. the CRD installed by hand under an older release's RBAC
            await self._stop()
            log.warning("NodeMaintenancePolicies, nodes, NodeMaintenances or hook Jobs cannot be listed; policies are off")
            return
        self._tasks.append(asyncio.create_task(self._publish(), name="policy status"))
        self.served = True
        log.info("NodeMaintenancePolicies are served: maintenances follow them")
        self.on_change()

    async def _stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks, self._mirrors, self.served, self._decision = [], {}, False, None

    def _changed(self, _namespace: str | None = None) -> None:
        self._decision = None
        self._dirty.set()
        if self.served:
            self.on_change()

    # ----------------------------------------------------------------- decisions
    def decision(self) -> pol.Decision:
        if self._decision is None:
            self._decision = pol.decide(
                (pol.Policy.of(p) for p in self._mirrors["policies"].objects.values()),
                self._mirrors["nodes"].objects.values(),
                self._mirrors["maintenances"].objects.values(),
            )
        return self._decision

    def _job(self, hook: str, body: Mapping[str, Any]) -> dict[str, Any] | None:
        return self._mirrors["jobs"].objects.get(f"{self.namespace}/{hooks.job_name(hook, body)}")

    async def _hook(self, hook: str, template: Mapping[str, Any], policy: str, body: Mapping[str, Any]) -> hooks.Outcome:
        """The hook Job's outcome, creating the Job when there is none yet (and the template may have one)."""
        standing = hooks.standing(hook, policy, template, body, self._job(hook, body), self.namespace)
        if standing.create is None:
            return standing.outcome
        try:
            job = await self.kube.request("POST", jobs_path(self.namespace), body=standing.create)
        except Conflict:  # created meanwhile; the watch brings it
            return standing.outcome
        except ApiError as error:  # a template the API refuses: say which field to fix
            return hooks.Outcome(hooks.FAILED, hooks.refusal(hook, policy, str(error)))
        return hooks.outcome(hook, policy, job, self.namespace)

    def gate(self, body: Mapping[str, Any], node: Mapping[str, Any], now: datetime.datetime, refused_jobs: Mapping[str, str]) -> Gate:
        """The policies' say in one drain step of ``body`` (in v1beta1, its stored status merged in); reads only."""
        if not self.served:
            return Gate()
        name = body["metadata"]["name"]
        job_name = hooks.job_name(hooks.PRE_DRAIN, body)
        seen = Seen(verdict=self.decision().verdicts.get(name), listed=f"/{name}" in self._mirrors["maintenances"].objects,
                    selected=any(pol.Policy.of(p).selects(node) for p in self._mirrors["policies"].objects.values()),
                    pre_drain_job=self._job(hooks.PRE_DRAIN, body), refused=refused_jobs.get(job_name, ""))
        return gate(body, node, seen, self.namespace, now)

    async def before_handback(self, body: Mapping[str, Any], version: str) -> None:
        """Run the postMaintenance Job of the policy governing the node before it is given back; raises
        kopf.TemporaryError (kopf calls again later) until it has succeeded. A NodeMaintenance that never
        held its node (one still waiting) runs nothing."""
        if not self.served:
            return
        node = self._mirrors["nodes"].objects.get(f"/{body['spec']['nodeName']}")
        if node is None or nodes.holder_of(node) != body["metadata"]["name"]:
            return
        governing = [p for p in map(pol.Policy.of, self._mirrors["policies"].objects.values()) if p.selects(node)]
        if len(governing) > 1:
            message = pol.Verdict(pol.CONFLICT, policies=tuple(sorted(p.name for p in governing))).message(node["metadata"]["name"])
            await self._note(body, version, Condition(pol.HOOK_CONDITIONS[hooks.POST_MAINTENANCE], "False", "PolicyConflict", message))
            raise kopf.TemporaryError(message, delay=HOOK_RECHECK_SECONDS[hooks.FAILED])
        if not governing or governing[0].post_maintenance is None:
            return
        outcome = await self._hook(hooks.POST_MAINTENANCE, governing[0].post_maintenance, governing[0].name, body)
        await self._note(body, version, pol.hook_condition(hooks.POST_MAINTENANCE, outcome))
        if outcome.state != hooks.SUCCEEDED:
            raise kopf.TemporaryError(outcome.message, delay=HOOK_RECHECK_SECONDS[outcome.state])

    async def _note(self, body: Mapping[str, Any], version: str, condition: Condition) -> None:
        """Record a hook's condition on a NodeMaintenance being deleted (its drain engine has stopped)."""
        status = body.get("status") or {}
        conditions = cond.with_conditions(list(status.get("conditions") or []), (condition,), generation=body["metadata"].get("generation", 1),
                                          now=timestamps.rfc3339(timestamps.now()))
        last_error = condition.message if condition.status != "True" else ""
        if conditions != status.get("conditions") or last_error != status.get("lastError"):
            with contextlib.suppress(ApiError):
                await self.kube.patch(nm_path(body["metadata"]["name"], version=version, subresource="status"),
                                      {"status": {"conditions": conditions, "lastError": last_error}})

    # ----------------------------------------------------------------- policy status
    async def _publish(self) -> None:
        """Write each policy's status when it changes, at most once a POLICY_STATUS_INTERVAL_SECONDS."""
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self._write_statuses()
            except Exception as error:  # tried again after the pause
                log.warning("writing NodeMaintenancePolicy statuses failed: %s", str(error) or type(error).__name__)
                self._dirty.set()
            await asyncio.sleep(POLICY_STATUS_INTERVAL_SECONDS)

    async def _write_statuses(self) -> None:
        decision = self.decision()
        now = timestamps.rfc3339(timestamps.now())
        for body in list(self._mirrors["policies"].objects.values()):
            name = body["metadata"]["name"]
            summary = decision.summaries.get(name)
            if summary is None:
                continue
            status = pol.policy_status(body.get("status") or {}, summary, body["metadata"].get("generation", 1), now)
            if status != self._written.get(name) and not pol.same_status(body.get("status") or {}, status):
                await self.kube.patch(policy_path(name, "status"), {"status": status})
                self._written[name] = status
