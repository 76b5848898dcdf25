"""The watches the policy decisions read, and their fan-out: which maintenances a change of one object touches.

Four watches, one each for the whole cluster: the policies, the nodes, the NodeMaintenances and the hook Jobs (of
every namespace, selected by their hook label: each runs in the namespace its hook names). Each is read from etcd, not from the watch cache: which node may be taken is decided from the
first listing. What the decisions read of them is kept here between changes: the policies as parsed (until a spec
changes), which policies govern each node (a node's changes rarely change that), and which maintenances name each node.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from node_maintenance.api.paths import jobs_path, nm_path, node_path, policy_path
from node_maintenance.client.protocol import KubeApi
from node_maintenance.client.watch import Mirror
from node_maintenance.policy import hooks, model


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

    def changed(self, key: str | None, touched: set[str]) -> None:
        """One object changed (``key``; None: a listing): ``touched`` are the maintenances it concerns."""


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
        self._governing: dict[str, tuple[str, ...]] | None = None  # each node's model.governing, kept between decisions
        self._parsed: list[model.Policy] | None = None  # the policies as decisions read them, kept until a spec changes
        self._on_node: dict[str, set[str]] = {}  # node name -> the NodeMaintenances naming it
        self._node_of: dict[str, str] = {}  # NodeMaintenance name -> the node it names

    def start(self) -> list[asyncio.Task[None]]:
        return [asyncio.create_task(m.run(), name=f"policy {kind} watch") for kind, m in self.mirrors.items()]

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
        return ""

    def objects(self, kind: Watched) -> Mapping[str, dict[str, Any]]:
        return self.mirrors[kind].objects

    def policies(self) -> list[model.Policy]:
        if self._parsed is None:
            self._parsed = [model.Policy.of(p) for p in self.objects(Watched.POLICIES).values()]
        return self._parsed

    def governing(self) -> dict[str, tuple[str, ...]]:
        """Which policies select each node."""
        if self._governing is None:
            policies = self.policies()
            self._governing = {n["metadata"]["name"]: model.governing(policies, n) for n in self.objects(Watched.NODES).values()}
        return self._governing

    def node(self, name: str) -> dict[str, Any] | None:
        """The node as the watch keeps it (what the decisions read), once listed; None otherwise."""
        nodes = self.mirrors[Watched.NODES]
        return nodes.objects.get(f"/{name}") if nodes.synced.is_set() else None

    def maintenance(self, name: str) -> dict[str, Any] | None:
        return self.objects(Watched.MAINTENANCES).get(f"/{name}")

    def job(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A hook Job, by namespace and name."""
        return self.objects(Watched.JOBS).get(f"{namespace}/{name}")

    def policy_bodies(self) -> Iterable[dict[str, Any]]:
        return list(self.objects(Watched.POLICIES).values())

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
        policy = policies.get(key) if key is not None else None
        if policy is not None and self._generations.get(key or "") == policy["metadata"].get("generation"):
            return
        self._generations = {k: p["metadata"].get("generation", 0) for k, p in policies.items()}
        self._governing, self._parsed = None, None
        self.listener.changed(key, set())

    def _node_changed(self, key: str | None) -> None:
        """A node changed: its maintenances are told, and those whose standing it changed."""
        name = (key or "").removeprefix("/")
        node = self.objects(Watched.NODES).get(key) if key is not None else None
        if key is None:
            self._governing = None
        elif self._governing is not None and node is None:
            self._governing.pop(name, None)
        elif self._governing is not None and node is not None:
            self._governing[name] = model.governing(self.policies(), node)
        self.listener.changed(key, set(self._on_node.get(name, ())))

    def _maintenance_changed(self, key: str | None) -> None:
        """A NodeMaintenance came, changed its place or went: it is told, and those whose standing it changed."""
        kept = self.objects(Watched.MAINTENANCES)
        if key is None:
            self._on_node, self._node_of = {}, {}
        for changed in kept if key is None else (key,):
            name = changed.removeprefix("/")
            self._on_node.get(self._node_of.pop(name, ""), set()).discard(name)
            if (m := kept.get(changed)) is not None:
                self._node_of[name] = m["spec"].get("nodeName", "")
                self._on_node.setdefault(self._node_of[name], set()).add(name)
        self.listener.changed(key, {(key or "").removeprefix("/")})
