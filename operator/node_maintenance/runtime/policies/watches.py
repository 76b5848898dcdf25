"""The watches the policy decisions read, and their fan-out: which maintenances a change of one object touches.

Four watches, one each for the whole cluster: the policies, the nodes, the NodeMaintenances and the hook Jobs (of
every namespace, selected by their hook label: each runs in the namespace its hook names). Each is read from etcd, not from the watch cache: which node may be taken is decided from the
first listing. What the decisions read of them is kept here between changes: the policies as parsed (until a spec
changes), which policies govern each node (a node's changes rarely change that), which maintenances name each node, and
each policy's line in order (``runtime.policies.lines``).

A policy deleted is kept, as last seen, for DEPARTED_GRACE_SECONDS: the decisions, the drains' rules and the hand-backs
read it as if it were still there, and the nodes its status records as recovering keep their slots. A replace
(``kubectl replace --force``, a GitOps tool's Replace) deletes a policy and creates one of the same name a moment later;
without the grace its line would take every node at once in between and its drains would lose their rules. The new
object ends the grace at once (its spec governs) and carries the old one's status until it has one of its own; a
deliberate delete ends the policy's pacing once the grace has passed. The grace is kept in memory only: what an operator
started again can tell of a policy deleted before is in ``runtime.policies.unseen``.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from node_maintenance.api.paths import jobs_path, nm_path, node_path, policy_path
from node_maintenance.client.protocol import KubeApi
from node_maintenance.client.watch import Mirror
from node_maintenance.drain.nodes import holder_of, live_holder
from node_maintenance.policy import hooks, line, model
from node_maintenance.runtime.policies.lines import Lines
from node_maintenance.runtime.policies.relation import Relation
from node_maintenance.runtime.policies.unseen import DEPARTED_GRACE_SECONDS, UnseenPolicy


class Watched(enum.StrEnum):
    """What the policies watch; the values name them in messages."""

    POLICIES = "NodeMaintenancePolicies"
    NODES = "nodes"
    MAINTENANCES = "NodeMaintenances"
    JOBS = "hook Jobs"


class Listener(Protocol):
    """Who hears of the changes: the decisions."""

    def changed_all(self) -> None:
        """Any maintenance's say may have changed (a listing, a hook Job, a watch's failure)."""

    def changed(self, touched: set[str], pools: Collection[str] | None, *, freed: bool = False) -> None:
        """One object changed: ``touched`` are the maintenances it concerns, ``pools`` the policies whose line it may
        move (None: any); ``freed``: a node's holder went, so a slot may have freed, and the next in line waits for it."""


@dataclass(frozen=True)
class Departed:
    """A policy deleted, kept while its grace lasts."""

    body: dict[str, Any]  # as last seen, its status included
    grace: asyncio.TimerHandle  # ends the grace


class PolicyWatches:
    """The four watches and what is kept of them between changes."""

    def __init__(self, kube: KubeApi, listener: Listener, jobs_namespace: str) -> None:
        """Hook Jobs are watched in ``jobs_namespace``; in every namespace when empty."""
        self.listener = listener
        self.mirrors = {
            Watched.POLICIES: Mirror(kube, policy_path(), self._policy_changed, from_cache=False),
            Watched.NODES: Mirror(kube, node_path(), self._node_changed, slim=model.slim_node, from_cache=False),
            Watched.MAINTENANCES: Mirror(kube, nm_path(), self._maintenance_changed, slim=model.slim_maintenance, from_cache=False),
            Watched.JOBS: Mirror(kube, jobs_path(jobs_namespace), self._job_changed, label_selector=hooks.HOOK_LABEL, from_cache=False),
        }
        self._generations: dict[str, int] = {}  # each policy's metadata.generation as last seen
        self._governing: Relation | None = None  # node name -> the policies selecting it (model.governing), kept between decisions
        self._holders = Relation()  # node name -> the NodeMaintenance its record names as holder
        self._parsed: list[model.Policy] | None = None  # the policies as decisions read them, kept until a spec changes
        self._nodes_of = Relation()  # NodeMaintenance name -> the node it names
        self._lines = Lines()  # each policy's maintenances in line order, kept while _governing is
        self._seen: dict[str, dict[str, Any]] = {}  # the policies as last seen: what a deletion took away
        self._departed: dict[str, Departed] = {}  # the policies deleted within their grace, by key
        self._carried: dict[str, dict[str, Any]] = {}  # the status of the policy a new one of its name replaced, until it has its own
        self.unseen = UnseenPolicy(lambda: self.objects(Watched.NODES).values(), listener.changed_all)

    def start(self) -> list[asyncio.Task[None]]:
        return [asyncio.create_task(m.run(), name=f"policy {kind} watch") for kind, m in self.mirrors.items()]

    def stop(self) -> None:
        for departed in self._departed.values():
            departed.grace.cancel()
        self._departed = {}
        self.unseen.stop()

    # ----------------------------------------------------------------- what is known
    def synced(self) -> bool:
        return all(m.synced.is_set() for m in self.mirrors.values())

    def trouble(self) -> str:
        """Why what they show is not known now ("" when every watch has listed and none is failing)."""
        for kind, mirror in self.mirrors.items():
            if not mirror.synced.is_set():
                return f"the {kind} have not been listed yet" + (f" ({mirror.failure})" if mirror.failure else "")
            if mirror.failure:
                return f"the watch of {kind} failed: {mirror.failure}"
        return self.unseen.why()

    def objects(self, kind: Watched) -> Mapping[str, dict[str, Any]]:
        return self.mirrors[kind].objects

    def policies(self) -> list[model.Policy]:
        """The policies, those deleted within their grace included."""
        if self._parsed is None:
            bodies = [*self.objects(Watched.POLICIES).values(), *(d.body for d in self._departed.values())]
            self._parsed = [model.Policy.of(p) for p in bodies]
        return self._parsed

    def governing(self) -> Mapping[str, tuple[str, ...]]:
        """Which policies select each node."""
        return self._selection().forward

    def _selection(self) -> Relation:
        if self._governing is None:
            self._lines.forget()
            policies = self.policies()
            self._governing = Relation((n["metadata"]["name"], model.governing(policies, n)) for n in self.objects(Watched.NODES).values())
        return self._governing

    def pool(self, policy: model.Policy, admitted: Collection[str], recovering: Mapping[str, Mapping[str, Any] | None]) -> line.Pool:
        """What ``policy``'s line is decided from, as the watches show it now (``admitted`` and ``recovering`` as the
        decisions keep them). Gathered from what is kept between changes, so its cost is the pool's, not the cluster's."""
        selection, nodes, kept = self._selection(), self.objects(Watched.NODES), self.objects(Watched.MAINTENANCES)
        selected = selection.having(policy.name)
        ordered = self._lines.of(policy.name, lambda: [kept[f"/{name}"] for node in selected for name in self._nodes_of.having(node)])
        return line.pool(policy, selected, lambda node: nodes[f"/{node}"], selection.forward, [kept[f"/{name}"] for name in ordered],
                         admitted, recovering)

    def nodes_named(self, names: Iterable[str]) -> dict[str, dict[str, Any] | None]:
        """The nodes of these names as the watch shows them (None: not there)."""
        nodes = self.objects(Watched.NODES)
        return {name: nodes.get(f"/{name}") for name in names}

    def exists(self, name: str) -> bool:
        """Whether a NodeMaintenance of that name exists (deleting or not): a holder a node records holds it only then."""
        return f"/{name}" in self.objects(Watched.MAINTENANCES)

    def node(self, name: str) -> dict[str, Any] | None:
        """The node as the watch keeps it (what the decisions read), once listed; None otherwise."""
        nodes = self.mirrors[Watched.NODES]
        return nodes.objects.get(f"/{name}") if nodes.synced.is_set() else None

    def maintenance(self, name: str) -> dict[str, Any] | None:
        return self.objects(Watched.MAINTENANCES).get(f"/{name}")

    def held(self, node_name: str) -> bool:
        """Whether a NodeMaintenance that exists holds the node now, as ``policy.line`` counts a holder (a record left
        by one whose finalizer was removed by hand holds nothing)."""
        return live_holder(self.node(node_name), lambda holder: self.maintenance(holder) is not None) is not None

    def job(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A hook Job, by namespace and name."""
        return self.objects(Watched.JOBS).get(f"{namespace}/{name}")

    def policy_bodies(self) -> Iterable[dict[str, Any]]:
        """The policies' objects that exist (none deleted: nothing is written to those)."""
        return list(self.objects(Watched.POLICIES).values())

    def status(self, name: str) -> Mapping[str, Any]:
        """The policy's status as stored: its object's; for one deleted within its grace, or created again in it and
        not written yet, the last one of the object deleted."""
        key = f"/{name}"
        live = self.objects(Watched.POLICIES).get(key)
        if live is not None and live.get("status"):
            return dict(live["status"])
        departed = self._departed.get(key)
        return departed.body["status"] if departed is not None else self._carried.get(key, {})

    # ----------------------------------------------------------------- feeding
    def feed(self, kind: Watched, event: str, obj: dict[str, Any]) -> None:
        """Take a watch event (``event``: ADDED, MODIFIED or DELETED) of ``kind`` as its watch would, and tell whom it
        touches: how the tests bring a change without a server."""
        self.mirrors[kind].take({"type": event, "object": obj})

    # ----------------------------------------------------------------- fan-out
    def _job_changed(self, _key: str | None = None) -> None:
        self.listener.changed_all()

    def _policy_changed(self, key: str | None) -> None:
        """A policy came, went or changed its spec: those whose standing that changed are told (a thousand in line
        are not woken by a new maxParallel that leaves them in line). A change of its status alone, which the
        policies write themselves every second while maintenances come and go, decides nothing."""
        policies = self.objects(Watched.POLICIES)
        self._follow_departures(policies)
        self.unseen.saw(p["metadata"]["name"] for p in policies.values())
        policy = policies.get(key) if key is not None else None
        if policy is not None and self._generations.get(key or "") == policy["metadata"].get("generation"):
            return
        self._generations = {k: p["metadata"].get("generation", 0) for k, p in policies.items()}
        self._governing, self._parsed = None, None
        if self.unseen.cleared() or key is None:
            self.listener.changed_all()
        else:
            self.listener.changed(set(), None)

    def _follow_departures(self, policies: Mapping[str, dict[str, Any]]) -> None:
        """Those deleted (or no longer listed) begin their grace; those back (created again, or listed) end it and
        carry its status until they have one of their own. The graces under way go on across a listing."""
        before, self._seen = self._seen, dict(policies)
        for key in before.keys() - policies.keys():
            body = {**before[key], "status": before[key].get("status") or self._carried.get(key, {})}
            grace = asyncio.get_running_loop().call_later(DEPARTED_GRACE_SECONDS, self._grace_ended, key)
            self._departed[key] = Departed(body=body, grace=grace)
        for key in self._departed.keys() & policies.keys():
            departed = self._departed.pop(key)
            departed.grace.cancel()
            self._carried[key] = departed.body["status"]
        self._carried = {key: status for key, status in self._carried.items() if key in policies and not policies[key].get("status")}

    def _grace_ended(self, key: str) -> None:
        """A policy deleted and not created again: its maintenances follow no policy, or the one that selects their node now."""
        del self._departed[key]
        self._governing, self._parsed = None, None
        self.listener.changed_all()

    def _node_changed(self, key: str | None) -> None:
        """A node changed: its maintenances are told, and those whose standing it changed."""
        name = (key or "").removeprefix("/")
        node = self.objects(Watched.NODES).get(key) if key is not None else None
        pools: set[str] | None = None  # the lines it may move: its policies' before and after (None: any)
        if key is None:
            self._governing = None
        elif self._governing is not None:
            before = self._governing.set(name, model.governing(self.policies(), node)) if node is not None else self._governing.drop(name)
            after = self._governing.of(name)
            pools = {*before, *after}
            left, joined = set(before) - set(after), set(after) - set(before)
            for maintenance in self._nodes_of.having(name) if left or joined else ():
                self._lines.leave(maintenance, left)
                self._lines.join(self.objects(Watched.MAINTENANCES)[f"/{maintenance}"], joined)
        freed = self._follow_holder(name, node, listing=key is None)
        if self.unseen.cleared(name if key is not None else None) or key is None:
            self.listener.changed_all()
        else:
            self.listener.changed(set(self._nodes_of.having(name)), pools, freed=freed)

    def _follow_holder(self, name: str, node: Mapping[str, Any] | None, *, listing: bool) -> bool:
        """Keep which nodes name each NodeMaintenance as their holder (all of them again after a listing); whether the
        node's holder went (given back, or gone with its node)."""
        if listing:
            self._holders = Relation((n["metadata"]["name"], (holder,)) for n in self.objects(Watched.NODES).values()
                                     if (holder := holder_of(dict(n))))
            return False
        if node is not None and (holder := holder_of(dict(node))):
            return bool(set(self._holders.set(name, (holder,))) - {holder})
        return bool(self._holders.drop(name))

    def _maintenance_changed(self, key: str | None) -> None:
        """A NodeMaintenance came, changed its place or went: it is told, and those whose standing it changed."""
        kept = self.objects(Watched.MAINTENANCES)
        if key is None:
            self._nodes_of = Relation((m["metadata"]["name"], (m["spec"].get("nodeName", ""),)) for m in kept.values())
            self._lines.forget()
            self.listener.changed_all()
            return
        name = key.removeprefix("/")
        m = kept.get(key)
        before = self._nodes_of.set(name, (m["spec"].get("nodeName", ""),)) if m is not None else self._nodes_of.drop(name)
        if m is None:
            self._lines.gone(name, self._pools_of(before))
        else:
            self._lines.join(m, self._pools_of(self._nodes_of.of(name)))
        # Its line and those of the nodes naming it as holder (a holder's existence counts there), before and after.
        nodes = {*before, *self._nodes_of.of(name), *self._holders.having(name)}
        self.listener.changed({name}, self._pools_of(nodes))

    def _pools_of(self, nodes: Iterable[str]) -> set[str]:
        governing = self.governing()
        return {policy for node in nodes for policy in governing.get(node, ())}
