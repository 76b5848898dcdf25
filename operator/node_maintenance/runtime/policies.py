"""NodeMaintenancePolicies at run time: watches what the policy decisions read, serves each drain
engine its verdict, tells a hand-back's executor which postMaintenance Job to create, and writes the
policies' status.

Releases before 0.4.0 install no policy CRD, and their RBAC grants nothing on policies or Jobs, so
nothing here runs (and every drain goes on as before) while the API server answers that the CRD does
not exist; it is looked for every few seconds, since an upgrade installs it while the operator runs.

Anything short of that answer fails closed: until the CRD has been read and every watch has listed,
and whenever a read fails, no maintenance takes a node. Drains that hold theirs keep the rules and
hooks last read, once read at all.

While a policy has waitForHealthy, the budgets, ReplicaSets and StatefulSets are watched too: a node given back
under it keeps its slot until the workloads evicted from it are healthy (``policy.health``), and one whose
workloads cannot be read keeps it.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any

import kopf

from node_maintenance.api import POLICY, timestamps
from node_maintenance.api import conditions as cond
from node_maintenance.api.conditions import Condition
from node_maintenance.api.paths import CRDS_KIND, POLICY_CRD, POLICY_VERSION, jobs_path, nm_path, node_path, policy_path
from node_maintenance.client.errors import KubeError, NotFound
from node_maintenance.client.http import AsyncKube
from node_maintenance.client.watch import Mirror
from node_maintenance.drain import evicted
from node_maintenance.drain import node as nodes
from node_maintenance.drain.status import noted
from node_maintenance.policy import decide as pol
from node_maintenance.policy import health, hooks
from node_maintenance.policy.gate import HOOK_RECHECK_SECONDS, Gate, Seen, gate, unknown
from node_maintenance.runtime import budgets
from node_maintenance.runtime.executor import Executor

CRD_CHECK_SECONDS = 5.0
POLICY_STATUS_INTERVAL_SECONDS = 1.0
# What waitForHealthy judges a workload by, by kind: watched only while a policy waits for health.
HEALTH_PATHS = {evicted.Kind.BUDGET: budgets.PATH, evicted.Kind.REPLICA_SET: "/apis/apps/v1/replicasets",
                evicted.Kind.STATEFUL_SET: "/apis/apps/v1/statefulsets"}
log = logging.getLogger(__name__)


class Policies:
    def __init__(self, kube: AsyncKube, namespace: str, on_change: Callable[[Collection[str] | None], None]) -> None:
        """``on_change`` is told the maintenances whose say from the policies may have changed (None: any)."""
        self.kube = kube
        self.namespace = namespace  # where hook Jobs run: the operator's own
        self.on_change = on_change
        self.ready = asyncio.Event()  # set after the first look at the CRD, whatever it found
        self.served = False  # the CRD is served: the watches run
        self.absent = False  # the API server answered that the CRD does not exist: no policy applies
        self._crd_trouble = ""  # why the CRD's last look did not tell that policies are served ("" when it did)
        self._mirrors: dict[str, Mirror] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._decision: pol.Decision | None = None
        self._seen: dict[str, pol.Verdict] = {}  # the verdicts of the last decision made, current or not
        self._all_told = False  # every maintenance was told since that decision: the next need not compare
        self._to_tell: set[str] = set()  # maintenances to tell once the changes seen meanwhile are decided
        self._telling: asyncio.Handle | None = None
        self._boundary: asyncio.TimerHandle | None = None  # decides again when the next window opens or closes
        self._generations: dict[str, int] = {}  # each policy's metadata.generation as last seen
        self._governing: dict[str, tuple[str, ...]] | None = None  # each node's pol.governing, kept between decisions
        self._parsed: list[pol.Policy] | None = None  # the policies as decisions read them, kept until a spec changes
        self._on_node: dict[str, set[str]] = {}  # node name -> the NodeMaintenances naming it
        self._node_of: dict[str, str] = {}  # NodeMaintenance name -> the node it names
        self._admitted: frozenset[str] = frozenset()  # granted a slot by the last decision: it stands until taken or given back
        self._written: dict[str, dict[str, Any]] = {}
        self._dirty = asyncio.Event()
        # waitForHealthy: the workloads' watches, the nodes given back not written to their policy's status yet, how
        # each recovering node stands by policy, why a wait was given up, and when the next cap passes.
        self._health: dict[str, Mirror] = {}
        self._health_tasks: list[asyncio.Task[None]] = []
        self._given_back: dict[str, dict[str, dict[str, Any]]] = {}
        self._judged: dict[str, dict[str, health.Judgement]] = {}
        self._gave_up: dict[str, str] = {}
        self._cap: asyncio.TimerHandle | None = None
        self._awaited: set[tuple[str, str]] = set()  # (kind, "namespace/name") of every workload a recovering node waits for
        self._writing = asyncio.Lock()

    # ----------------------------------------------------------------- lifecycle
    async def run(self) -> None:
        try:
            while True:
                await self._look()
                self.ready.set()
                await asyncio.sleep(CRD_CHECK_SECONDS)
        finally:
            await self._stop()

    async def _look(self) -> None:
        """Read the CRD: start the watches once it is served, stop them only when it does not exist."""
        trouble = self._crd_trouble
        try:
            await self._conclude(await self.kube.request("GET", POLICY_CRD))
        except NotFound as missing:
            if missing.names(CRDS_KIND, POLICY.crd_name):
                await self._conclude(None)
            else:  # a path not served (yet): an API server starting answers so before it serves CRDs
                self._crd_trouble = f"the NodeMaintenancePolicy CRD could not be read: {missing}"
        except KubeError as error:  # unknown: whatever was known holds, and no node is taken meanwhile
            self._crd_trouble = f"the NodeMaintenancePolicy CRD could not be read: {error}"
        if self._crd_trouble != trouble:
            if self._crd_trouble:
                log.warning("%s; no maintenance takes a node until it is", self._crd_trouble)
            self.on_change(None)

    async def _conclude(self, crd: dict[str, Any] | None) -> None:
        """What the CRD just read means for the policies (None: the server said this CRD does not exist)."""
        self.absent = crd is None
        if crd is None:
            self._crd_trouble = ""
            if self.served:
                await self._stop()
                log.info("the NodeMaintenancePolicy CRD is gone: maintenances follow no policy")
        elif served_version(crd):
            self._crd_trouble = ""
            if not self.served:
                self._start()
        else:  # being installed or changed: its version is not served yet
            self._crd_trouble = f"the NodeMaintenancePolicy CRD is not established or does not serve {POLICY_VERSION} yet"

    def _start(self) -> None:
        # Read from etcd, not from the watch cache: which node may be taken is decided from the first listing.
        self._mirrors = {
            "NodeMaintenancePolicies": Mirror(self.kube, policy_path(), self._policy_changed, from_cache=False),
            "nodes": Mirror(self.kube, node_path(), self._node_changed, slim=pol.slim_node, from_cache=False),
            "NodeMaintenances": Mirror(self.kube, nm_path(), self._maintenance_changed, slim=pol.slim_maintenance, from_cache=False),
            "hook Jobs": Mirror(self.kube, jobs_path(self.namespace), self._changed, from_cache=False),
        }
        self._tasks = [asyncio.create_task(m.run(), name=f"policy {k} watch") for k, m in self._mirrors.items()]
        self._tasks.append(asyncio.create_task(self._publish(), name="policy status"))
        self.served = True
        log.info("NodeMaintenancePolicies are served: maintenances follow them once they are read")

    async def _stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._telling is not None:
            self._telling.cancel()
        if self._boundary is not None:
            self._boundary.cancel()
        self._watch_health(False)
        await asyncio.gather(*self._health_tasks, return_exceptions=True)
        if self._cap is not None:
            self._cap.cancel()
        self._health_tasks, self._cap = [], None
        self._tasks, self._mirrors, self.served, self._decision, self._admitted = [], {}, False, None, frozenset()
        self._seen, self._generations, self._to_tell, self._telling, self._governing = {}, {}, set(), None, None
        self._boundary = None
        self._parsed, self._on_node, self._node_of = None, {}, {}

    def unknown(self) -> str:
        """Why the policies are not known now, "" when they are: the CRD unread or failing, a watch that has
        not listed yet or whose last read failed."""
        if self._crd_trouble:
            return self._crd_trouble
        if self.absent:
            return ""
        if not self.served:
            return "the NodeMaintenancePolicy CRD has not been read yet"
        for kind, mirror in self._mirrors.items():
            if not mirror.synced.is_set():
                return f"the {kind} have not been listed yet" + (f" ({mirror.failure})" if mirror.failure else "")
            if mirror.failure:
                return f"the watch of {kind} failed: {mirror.failure}"
        return ""

    def _synced(self) -> bool:
        return self.served and all(m.synced.is_set() for m in self._mirrors.values())

    def _changed(self, _key: str | None = None) -> None:
        """A policy or hook Job changed, or a watch listed: any maintenance's say may have changed."""
        self._decision = None
        self._dirty.set()
        if self.served:
            self._all_told = True
            self.on_change(None)

    def _policy_changed(self, key: str | None) -> None:
        """A policy came, went or changed its spec: those whose standing that changed are told (a thousand in line
        are not woken by a new maxParallel that leaves them in line). A change of its status alone, which the
        policies write themselves every second while maintenances come and go, decides nothing."""
        policies = self._mirrors["NodeMaintenancePolicies"].objects
        policy = policies.get(key) if key is not None else None
        if policy is not None and self._generations.get(key or "") == policy["metadata"].get("generation"):
            return
        self._generations = {k: p["metadata"].get("generation", 0) for k, p in policies.items()}
        self._governing, self._parsed = None, None
        self._decided_again(key, set())

    def _node_changed(self, key: str | None) -> None:
        """A node changed: its maintenances are told, and those whose standing it changed."""
        name = (key or "").removeprefix("/")
        node = self._mirrors["nodes"].objects.get(key) if key is not None else None
        if key is None:
            self._governing = None
        elif self._governing is not None and node is None:
            self._governing.pop(name, None)
        elif self._governing is not None and node is not None:
            self._governing[name] = pol.governing(self._policies(), node)
        self._decided_again(key, set(self._on_node.get(name, ())))

    def _maintenance_changed(self, key: str | None) -> None:
        """A NodeMaintenance came, changed its place or went: it is told, and those whose standing it changed."""
        kept = self._mirrors["NodeMaintenances"].objects
        if key is None:
            self._on_node, self._node_of = {}, {}
        for changed in kept if key is None else (key,):
            name = changed.removeprefix("/")
            self._on_node.get(self._node_of.pop(name, ""), set()).discard(name)
            if (m := kept.get(changed)) is not None:
                self._node_of[name] = m["spec"].get("nodeName", "")
                self._on_node.setdefault(self._node_of[name], set()).add(name)
        self._decided_again(key, {(key or "").removeprefix("/")})

    def _decided_again(self, key: str | None, touched: set[str]) -> None:
        """After a change of one object (``key``; None: a listing), tell the maintenances ``touched`` by it and those
        whose standing it changed (a place in line aside, which they look at now and then): a thousand in line are not
        all woken by every node their policy takes or gives back. The decision is made once for every change the
        watches brought meanwhile (a burst of them is decided once, not once each), before the loop's next turn."""
        if key is None or not self.served or self.unknown():
            self._changed()
            return
        self._decision = None
        self._dirty.set()
        self._tell(touched)

    def _tell(self, names: set[str]) -> None:
        self._to_tell |= names
        if self._telling is None:
            self._telling = asyncio.get_running_loop().call_soon(self._told)

    def _told(self) -> None:
        """Decide (unless a drain's step did meanwhile, which noted whom it moved) and tell whom the changes touched."""
        self._telling = None
        if self.served and not self.unknown():
            self.decision()
        names, self._to_tell = self._to_tell, set()
        if names:
            self.on_change(names)

    # ----------------------------------------------------------------- decisions
    def decision(self) -> pol.Decision:
        if self._decision is None:
            policies = self._policies()
            if self._governing is None:
                self._governing = {n["metadata"]["name"]: pol.governing(policies, n) for n in self._mirrors["nodes"].objects.values()}
            recovering = self._recovering(policies)
            now = timestamps.now()
            self._decision = pol.decide(policies, self._mirrors["nodes"].objects.values(), self._mirrors["NodeMaintenances"].objects.values(),
                                        self._admitted, self._governing, recovering, now=now)
            self._wake_at_boundary(self._decision, now)
            self._admitted = frozenset(name for name, v in self._decision.verdicts.items() if v.kind == pol.ADMITTED)
            before, after, self._seen = self._seen, self._decision.verdicts, self._decision.verdicts
            if not self._all_told:  # those it moved are told; a decision made after every one was told need not
                self._tell({n for n in before.keys() | after.keys() if pol.standing(before.get(n)) != pol.standing(after.get(n))})
            self._all_told = False
        return self._decision

    def _wake_at_boundary(self, decision: pol.Decision, now: datetime.datetime) -> None:
        """At the next window's opening or end of any policy, decide again and tell every maintenance: those in line
        take the slots a window opens, and those holding a node under windowEnd Pause stop or resume evicting."""
        boundaries = [s.window.boundary for s in decision.summaries.values() if s.window is not None and s.window.boundary is not None]
        if self._boundary is not None:
            self._boundary.cancel()
            self._boundary = None
        if boundaries:
            delay = pol.until(min(boundaries), now)
            self._boundary = asyncio.get_running_loop().call_later(delay or 0.0, self._at_boundary)

    def _at_boundary(self) -> None:
        self._boundary = None
        self._changed()

    # ----------------------------------------------------------------- waitForHealthy
    def _entries(self, name: str) -> list[dict[str, Any]]:
        """The policy's recovering nodes: as last written (we are its status's only writer), else as stored, and
        those given back since."""
        written = self._written.get(name)
        stored = written if written is not None else (self._mirrors["NodeMaintenancePolicies"].objects.get(f"/{name}") or {}).get("status") or {}
        entries = {e["node"]: e for e in stored.get("recovering") or ()}
        return list({**entries, **self._given_back.get(name, {})}.values())

    def _recovering(self, policies: list[pol.Policy]) -> dict[str, list[str]]:
        """Judge every recovering node (dropped once its workloads are healthy, or the cap passed, or its policy no
        longer waits for health); by policy, the nodes that keep their slot."""
        self._watch_health(any(p.wait_for_healthy for p in policies))
        unknown = {kind: (f"the {kind}s have not been listed yet" if not m.synced.is_set() else f"the watch of {kind}s failed: {m.failure}")
                   for kind, m in self._health.items() if not m.synced.is_set() or m.failure}
        unknown |= {kind: f"the {kind}s are not watched" for kind in HEALTH_PATHS if kind not in self._health}
        now, recovering, soonest, awaited = timestamps.now(), {}, None, set()
        for policy in policies:
            judged = {}
            for entry in self._entries(policy.name) if policy.wait_for_healthy else ():
                workloads = [(w["kind"], w["namespace"], w["name"]) for w in entry.get("workloads") or ()]
                objects = {w: self._health[w[0]].objects.get(f"{w[1]}/{w[2]}") if w[0] in self._health else None for w in workloads}
                judged[entry["node"]] = judgement = health.judge(entry, objects, unknown, policy.wait_for_healthy_seconds, now)
                before: health.Judgement | None = self._judged.get(policy.name, {}).get(entry["node"])
                if judgement.state == health.GAVE_UP and (before is None or before.state != health.GAVE_UP):
                    self._gave_up[policy.name] = message = health.gave_up_message(judgement, policy.wait_for_healthy_seconds)
                    log.warning("NodeMaintenancePolicy %s: %s", policy.name, message)
                if judgement.state == health.WAITING:
                    soonest = judgement.expires_in if soonest is None else min(soonest, judgement.expires_in)
                    awaited |= {(kind, f"{namespace}/{name}") for kind, namespace, name in workloads}
            self._judged[policy.name] = judged
            recovering[policy.name] = [node for node, j in judged.items() if j.state == health.WAITING]
        self._awaited = awaited
        if self._cap is not None:
            self._cap.cancel()
        self._cap = asyncio.get_running_loop().call_later(soonest, self._decided_again, "", set()) if soonest is not None else None
        return recovering

    def _watch_health(self, wanted: bool) -> None:
        """Watch the workloads waitForHealthy judges while some policy waits for health, and only then."""
        if wanted and not self._health:
            self._health = {kind: Mirror(self.kube, path, functools.partial(self._health_changed, kind), slim=slim_workload)
                            for kind, path in HEALTH_PATHS.items()}
            self._health_tasks = [asyncio.create_task(m.run(), name=f"policy {kind} watch") for kind, m in self._health.items()]
        elif not wanted and self._health:
            for task in self._health_tasks:
                task.cancel()
            self._health = {}

    def _health_changed(self, kind: str, key: str | None) -> None:
        """A workload a recovering node waits for changed: the recovering nodes are judged again (those in line told
        if that moves them). Any other changes nothing."""
        if key is not None and (kind, key) not in self._awaited:
            return
        self._decision = None
        self._dirty.set()
        if self.served and key is not None:
            self._tell(set())
        elif self.served:
            self._changed()

    def _policies(self) -> list[pol.Policy]:
        if self._parsed is None:
            self._parsed = [pol.Policy.of(p) for p in self._mirrors["NodeMaintenancePolicies"].objects.values()]
        return self._parsed

    def node(self, name: str) -> dict[str, Any] | None:
        """The node as the policies' watch keeps it (what the decisions read), once listed; None otherwise."""
        nodes_seen = self._mirrors.get("nodes")
        return nodes_seen.objects.get(f"/{name}") if nodes_seen and nodes_seen.synced.is_set() else None

    def _job(self, hook: str, body: Mapping[str, Any]) -> dict[str, Any] | None:
        return self._mirrors["hook Jobs"].objects.get(f"{self.namespace}/{hooks.job_name(hook, body)}")

    async def _hook(self, hook: str, template: Mapping[str, Any], policy: str, body: Mapping[str, Any], executor: Executor) -> hooks.Outcome:
        """The hook Job's outcome, the executor creating the Job when there is none yet (and the template may have one)."""
        standing = hooks.standing(hook, policy, template, body, self._job(hook, body), self.namespace)
        if standing.create is None:
            return standing.outcome
        refused = await executor.create_job(standing.create)
        if refused:  # a template the API refuses: say which field to fix
            return hooks.Outcome(hooks.FAILED, hooks.refusal(hook, policy, refused))
        return hooks.outcome(hook, policy, standing.create, self.namespace)

    def gate(self, body: Mapping[str, Any], node: Mapping[str, Any], now: datetime.datetime, refused_jobs: Mapping[str, str]) -> Gate:
        """The policies' say in one drain step of ``body`` (in v1beta1, its stored status merged in); reads only.
        While they are not known, a maintenance that holds its node keeps its last rules once they were read."""
        why = self.unknown()
        if why and not (self._synced() and nodes.holder_of(dict(node)) == body["metadata"]["name"]):
            return unknown(body, node, why, now)
        if not self.served:
            return Gate()
        name = body["metadata"]["name"]
        job_name = hooks.job_name(hooks.PRE_DRAIN, body)
        policies = self._policies()
        kept = self._mirrors["NodeMaintenances"].objects.get(f"/{name}")
        # One that holds its node, as the policies' watches show them, is decided on its own: no line decides it.
        own = self.node(body["spec"]["nodeName"])
        holds = kept is not None and not kept["metadata"].get("deletionTimestamp") and own is not None and nodes.holder_of(own) == name
        verdict = pol.holding(policies, own, now) if holds and own is not None else self.decision().verdicts.get(name)
        seen = Seen(verdict=verdict, listed=kept is not None, selected=any(p.selects(node) for p in policies),
                    pre_drain_job=self._job(hooks.PRE_DRAIN, body), refused=refused_jobs.get(job_name, ""))
        return gate(body, node, seen, self.namespace, now)

    async def before_handback(self, body: Mapping[str, Any], executor: Executor) -> None:
        """Run the postMaintenance Job of the policy governing the node before it is given back; raises
        kopf.TemporaryError (kopf calls again later) until it has succeeded. A NodeMaintenance that never
        held its node (one still waiting) runs nothing. While the policies are not known, it waits for them.
        ``executor`` (the hand-back's) creates the Job and records the hook's condition."""
        if why := self.unknown():
            raise kopf.TemporaryError(f"the node is given back once NodeMaintenancePolicies are read: {why}", delay=CRD_CHECK_SECONDS)
        if not self.served:
            return
        node = self._mirrors["nodes"].objects.get(f"/{body['spec']['nodeName']}")
        if node is None or nodes.holder_of(node) != body["metadata"]["name"]:
            return
        governing = [p for p in self._policies() if p.selects(node)]
        if len(governing) > 1:
            message = pol.Verdict(pol.CONFLICT, policies=tuple(sorted(p.name for p in governing))).message(node["metadata"]["name"])
            await self._note(body, executor, Condition(pol.HOOK_CONDITIONS[hooks.POST_MAINTENANCE], "False", "PolicyConflict", message))
            raise kopf.TemporaryError(message, delay=HOOK_RECHECK_SECONDS[hooks.FAILED])
        if not governing:
            return
        if governing[0].post_maintenance is not None:
            outcome = await self._hook(hooks.POST_MAINTENANCE, governing[0].post_maintenance, governing[0].name, body, executor)
            await self._note(body, executor, pol.hook_condition(hooks.POST_MAINTENANCE, outcome))
            if outcome.state != hooks.SUCCEEDED:
                raise kopf.TemporaryError(outcome.message, delay=HOOK_RECHECK_SECONDS[outcome.state])
        if governing[0].wait_for_healthy:
            await self._recover(governing[0].name, node["metadata"]["name"], (body.get("status") or {}).get("evictedWorkloads") or ())

    async def _recover(self, policy: str, node: str, workloads: Collection[Mapping[str, Any]]) -> None:
        """Under waitForHealthy, the node's slot stays in use once it is given back: its policy's status records it
        first (a restart keeps it); until that is written, the node is not given back."""
        if not any(e["node"] == node for e in self._entries(policy)):
            self._given_back.setdefault(policy, {})[node] = health.entry(node, workloads, timestamps.now())
        self._decision = None
        try:
            await self._write_statuses()
        except KubeError as error:
            raise kopf.TemporaryError(f"the node is given back once NodeMaintenancePolicy {policy} records it as recovering: {error}",
                                      delay=HOOK_RECHECK_SECONDS[hooks.FAILED]) from error

    @staticmethod
    async def _note(body: Mapping[str, Any], executor: Executor, condition: Condition) -> None:
        """Record a hook's condition on a NodeMaintenance being deleted (its drain engine has stopped)."""
        fields = noted(body.get("status") or {}, condition, generation=body["metadata"].get("generation", 1),
                       now=timestamps.rfc3339(timestamps.now()))
        if fields is not None:
            await executor.note(fields)

    # ----------------------------------------------------------------- policy status
    async def _publish(self) -> None:
        """Write each policy's status when it changes, at most once a POLICY_STATUS_INTERVAL_SECONDS."""
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            if not self._synced():  # a status from half the objects would be wrong; each listing sets _dirty again
                continue
            try:
                await self._write_statuses()
            except Exception as error:  # tried again after the pause
                log.warning("writing NodeMaintenancePolicy statuses failed: %s", str(error) or type(error).__name__)
                self._dirty.set()
            await asyncio.sleep(POLICY_STATUS_INTERVAL_SECONDS)

    async def _write_statuses(self) -> None:
        async with self._writing:
            decision = self.decision()
            now = timestamps.rfc3339(timestamps.now())
            for body in list(self._mirrors["NodeMaintenancePolicies"].objects.values()):
                name = body["metadata"]["name"]
                summary = decision.summaries.get(name)
                if summary is None:
                    continue
                previous = self._written.get(name) or body.get("status") or {}
                given_back, gave_up = set(self._given_back.get(name, {})), self._gave_up.get(name)
                status = pol.policy_status(body.get("status") or {}, summary, body["metadata"].get("generation", 1), now)
                if self._entries(name) or any(p.name == name and p.wait_for_healthy for p in self._policies()):
                    status = self._with_recovering(name, previous, status, body["metadata"].get("generation", 1), now)
                if status != self._written.get(name) and not pol.same_status(body.get("status") or {}, status):
                    await self.kube.patch(policy_path(name, "status"), {"status": status})
                    self._written[name] = status
                for node in given_back:  # written: the status holds them from now on (unless they recovered meanwhile)
                    self._given_back.get(name, {}).pop(node, None)
                if gave_up is not None and self._gave_up.get(name) == gave_up:
                    del self._gave_up[name]

    def _with_recovering(self, name: str, previous: Mapping[str, Any], status: dict[str, Any], generation: int, now: str) -> dict[str, Any]:
        """The policy's status with its recovering nodes and its Recovering condition."""
        before: Mapping[str, Any] = next((c for c in previous.get("conditions") or () if c.get("type") == health.CONDITION), {})
        recovering, (state, reason, message) = health.status(self._entries(name), self._judged.get(name, {}), self._gave_up.get(name, ""), before)
        conditions = cond.with_conditions(status["conditions"], (Condition(health.CONDITION, state, reason, message),), generation=generation, now=now)
        return {**status, "recovering": recovering, "conditions": conditions}


def slim_workload(obj: dict[str, Any]) -> dict[str, Any]:
    """What waitForHealthy reads of a budget, ReplicaSet or StatefulSet: its generations and counts."""
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    counts = ("observedGeneration", "currentHealthy", "expectedPods", "availableReplicas")
    return {"metadata": {k: meta[k] for k in ("name", "namespace", "generation") if k in meta},
            "spec": {k: spec[k] for k in ("replicas",) if k in spec}, "status": {k: status[k] for k in counts if k in status}}


def served_version(crd: Mapping[str, Any]) -> bool:
    """Whether the CRD is established and serves the version the policies are read in."""
    established = any(c.get("type") == "Established" and c.get("status") == "True" for c in (crd.get("status") or {}).get("conditions") or [])
    return established and any(v["name"] == POLICY_VERSION and v.get("served") for v in crd["spec"]["versions"])
