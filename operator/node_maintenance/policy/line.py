"""The line of each NodeMaintenancePolicy, as pure functions: how many of its nodes may be in maintenance and
unavailable, and which NodeMaintenances get a slot or wait in line.

A NodeMaintenance holds a slot exactly while its node names it as holder (the Node records it, so an
operator restart changes nothing). Waiting ones get slots strictly in creation order: the first in
line that does not fit the pool-wide limits keeps every later one waiting too, so none overtakes another. A
topology limit holds within each value of its node label (a domain, such as a zone): one whose domain is full keeps
only the later ones of that domain waiting, and those of other domains go ahead. A node without the label is in no
domain of that key, and that key's limits do not apply to it.

Under maintenance windows, a waiting maintenance takes a slot only while one is open; windows that cannot be read
are never open. A maintenance that holds its node, or was granted a slot before the window closed, goes on at the
window's end, unless the policy's windowEnd is Pause: it then evicts nothing until the next window opens.

A limit lowered since a slot was granted, the pool's or a topology domain's, takes back the latest grants it has no
room for. Otherwise a slot once granted stands until its maintenance takes the node, is deleted, or gives the slot back: a
check made at takeover (another holder's remediation Lease, the etcd-quorum guard) refused the node,
and its status says so. Such a maintenance counts for nothing and keeps nobody waiting; it looks again
and rejoins the line, in its creation-order place, once the check passes, but never takes a slot
granted meanwhile to another, which may be taking its node at that moment.
"""

from __future__ import annotations

import datetime
import functools
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from node_maintenance.drain import status
from node_maintenance.drain.nodes import live_holder
from node_maintenance.policy import hooks, model, windows
from node_maintenance.policy.verdicts import Decision, Summary, Verdict, VerdictKind

# How many NodeMaintenance names keep the key that orders them (a few hundred bytes each).
ORDERED_NAMES = 8192


def order(maintenance: Mapping[str, Any]) -> tuple[str, tuple[str | int, ...], str]:
    """Creation order; the API stamps creation to the second, so maintenances created together (w-9, w-10) go in the
    order their names count, digit runs read as numbers, and then by name (w-09 before w-9)."""
    meta = maintenance["metadata"]
    return meta.get("creationTimestamp") or "", _natural(meta["name"]), meta["name"]


@functools.lru_cache(maxsize=ORDERED_NAMES)
def _natural(name: str) -> tuple[str | int, ...]:
    """``name`` as text and numbers in turn: text at even places, numbers at odd ones, so any two compare. Kept for the
    names last seen: a line is put in order again whole after a listing or a policy's change, and splitting each name
    again was 7% of the operator's time in a fleet of a thousand when every decision did."""
    return tuple(int(part) if i % 2 else part for i, part in enumerate(re.split(r"(\d+)", name)))


@dataclass(frozen=True)
class Pool:
    """What one policy's line is decided from: the nodes it selects and the maintenances of those nodes. A pool is
    decided apart from the others (``decide_pool``), so a change re-decides only the pools it touches."""

    policy: model.Policy
    nodes: Mapping[str, Mapping[str, Any]]  # the nodes the policy selects, by name
    maintenances: Sequence[Mapping[str, Any]]  # the live maintenances of those nodes, in line order (``order``)
    selecting: Mapping[str, tuple[str, ...]]  # of each of its nodes, every policy selecting it (more than one: a conflict)
    admitted: Collection[str] = ()  # granted a slot of this policy by the decision before: it stands until taken or given back
    # The nodes given back whose evicted workloads it still waits for (waitForHealthy), selected or not (None: gone).
    recovering: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)


@dataclass(frozen=True)
class PoolDecision:
    """One pool's verdicts (a maintenance on a node in conflict has one in each pool selecting it) and its summary."""

    verdicts: dict[str, Verdict]
    summary: Summary


def in_line(m: Mapping[str, Any]) -> bool:
    """Whether a maintenance stands in its line: deleted ones, and those ended by their timeout (the node given back),
    hold no slot and wait for none."""
    return not m["metadata"].get("deletionTimestamp") and not status.timed_out(m.get("status") or {})


def pool(policy: model.Policy, selected: Iterable[str], node: Callable[[str], Mapping[str, Any]], selecting: Mapping[str, tuple[str, ...]],
         ordered: Iterable[Mapping[str, Any]], admitted: Collection[str], recovering: Mapping[str, Mapping[str, Any] | None]) -> Pool:
    """``policy``'s pool: the nodes it selects (``selected``, each read through ``node``), who selects each of them, and
    the maintenances on them that stand in line (``ordered``: those on its nodes, already in line order, ``order``;
    sorting is the caller's, which may keep the order between decisions). The one rule both deciders gather a pool by:
    ``decide`` from the whole cluster, the operator's decisions from what their watches keep."""
    names = sorted(selected)
    return Pool(policy=policy, nodes={name: node(name) for name in names}, maintenances=[m for m in ordered if in_line(m)],
                selecting={name: selecting[name] for name in names}, admitted=admitted, recovering=recovering)


def decide(policies: Iterable[model.Policy], node_list: Iterable[Mapping[str, Any]], maintenances: Iterable[Mapping[str, Any]],
           admitted: Mapping[str, str] | None = None, governed: Mapping[str, tuple[str, ...]] | None = None,
           recovering: Mapping[str, Collection[str]] | None = None, *, now: datetime.datetime, operator_namespace: str = "") -> Decision:
    """Every NodeMaintenance's verdict and every policy's summary at ``now``, from the cluster as it is and those
    ``admitted`` by the decision before, each with the policy whose slot it was granted (slots stand until taken, given
    back or their maintenance is deleted; a slot of one policy is no slot of another, which checks its own limits).
    ``governed``: ``governing`` of every node, when the caller keeps it (a node's changes rarely change it).
    ``recovering``: by policy, the nodes given back whose evicted workloads it still waits for (waitForHealthy):
    each keeps its slot in use. ``operator_namespace``: the operator's own, where no hook Job runs (a policy's summary
    says which of its hooks name it, or no namespace). Each pool is decided by ``decide_pool``, and a maintenance in
    conflict keeps the verdict of the last of its policies in name order."""
    policies = sorted(policies, key=lambda p: p.name)
    maintenances = list(maintenances)
    # A maintenance taking over a node whose holder is gone is governed like any other.
    exists = {m["metadata"]["name"] for m in maintenances}.__contains__
    by_node = {n["metadata"]["name"]: n for n in node_list}
    selecting = governed if governed is not None else {name: model.governing(policies, node) for name, node in by_node.items()}
    ordered = sorted(maintenances, key=order)
    verdicts: dict[str, Verdict] = {}
    summaries: dict[str, Summary] = {}
    for policy in policies:
        selected = {name for name in by_node if policy.name in selecting[name]}
        gathered = pool(policy, selected, by_node.__getitem__, selecting,
                        (m for m in ordered if (m.get("spec") or {}).get("nodeName") in selected),
                        {name for name, p in (admitted or {}).items() if p == policy.name},
                        {name: by_node.get(name) for name in (recovering or {}).get(policy.name, ())})
        decided = decide_pool(gathered, exists, now=now, operator_namespace=operator_namespace)
        verdicts.update(decided.verdicts)
        summaries[policy.name] = decided.summary
    return Decision(verdicts=verdicts, summaries=summaries)


def decide_pool(pool: Pool, exists: Callable[[str], bool], *, now: datetime.datetime, operator_namespace: str = "") -> PoolDecision:
    """The verdicts of one pool's maintenances and its policy's summary at ``now`` (``exists``: whether a NodeMaintenance
    of that name exists, for a holder its node records); see ``decide``. It reads nothing beyond its pool, so a change
    elsewhere leaves its decision as it was."""
    policy, by_node = pool.policy, pool.nodes
    window = policy.window(now)
    verdicts: dict[str, Verdict] = {}
    held = {name for name, n in by_node.items() if live_holder(n, exists)}
    down = held | {name for name, n in by_node.items() if model.unavailable(n)}
    parallel = model.resolve(policy.max_parallel, len(by_node))
    limit = model.resolve(policy.max_unavailable, len(by_node))
    domains = _Domains(policy.topology, by_node.values(), held, down)
    conflicts = tuple((n, pool.selecting[n]) for n in sorted(by_node) if len(pool.selecting[n]) > 1)
    in_conflict = {n for n, _ in conflicts}
    waiting: list[Mapping[str, Any]] = []
    for m in pool.maintenances:
        node_name = str((m.get("spec") or {}).get("nodeName") or "")
        holder = live_holder(by_node[node_name], exists)
        if node_name in in_conflict:
            verdicts[m["metadata"]["name"]] = Verdict(kind=VerdictKind.CONFLICT, policy=policy, policies=pool.selecting[node_name])
        elif holder == m["metadata"]["name"]:
            verdicts[m["metadata"]["name"]] = with_slot(policy, window)
        elif holder:  # another maintenance holds the node: the drain reports it and touches nothing
            verdicts[m["metadata"]["name"]] = Verdict(kind=VerdictKind.UNGOVERNED, policy=policy)
        else:
            waiting.append(m)

    # What taking each node adds to the unavailable count: nothing for a node already out of service.
    adds = {m["metadata"]["name"]: 0 if m["spec"]["nodeName"] in down else 1 for m in waiting}
    granted = {m["metadata"]["name"] for m in waiting if m["metadata"]["name"] in pool.admitted and not model.gave_back(m)}
    still = set(pool.recovering) - held  # a node taken again counts once, as held
    used, out = len(held) + len(still) + len(granted), len(down) + sum(adds[name] for name in granted)
    for m in reversed(waiting):  # a limit lowered since (or a slot now recovering) takes back the latest grants first
        name = m["metadata"]["name"]
        if name in granted and ((parallel is not None and used > parallel) or (limit is not None and out > limit)):
            granted.discard(name)
            used, out = used - 1, out - adds[name]
    for recovering_node in sorted(still):  # its slot is in use in its domains too, those that still exist
        if (node := pool.recovering[recovering_node]) is not None:
            domains.take(node, 0)
    for m in waiting:  # and so does a topology limit added or lowered since, domain by domain, in line order
        name = m["metadata"]["name"]
        if name not in granted:
            continue
        if domains.full(by_node[m["spec"]["nodeName"]], adds[name]):
            granted.discard(name)
            used, out = used - 1, out - adds[name]
        else:
            domains.take(by_node[m["spec"]["nodeName"]], adds[name])
    queue: list[tuple[str, str]] = []  # (name, the full domain keeping it waiting, "" for the pool)
    pool_full = window is not None and not window.open
    for m in waiting:
        name, node_obj = m["metadata"]["name"], by_node[m["spec"]["nodeName"]]
        if model.gave_back(m):  # counts for nothing and keeps nobody waiting
            verdicts[name] = Verdict(kind=VerdictKind.GIVEN_BACK, policy=policy)
        elif name in granted:  # granted before, counted above; under windowEnd Pause it may take its node, not drain it
            verdicts[name] = with_slot(policy, window)
        elif pool_full or not ((parallel is None or used + 1 <= parallel) and (limit is None or not adds[name] or out + adds[name] <= limit)):
            pool_full = True  # the first that does not fit the pool keeps every later one waiting
            queue.append((name, ""))
        elif full := domains.full(node_obj, adds[name]):  # keeps only the later ones of that domain waiting
            queue.append((name, full))
        else:
            used, out = used + 1, out + adds[name]
            domains.take(node_obj, adds[name])
            verdicts[name] = Verdict(kind=VerdictKind.ADMITTED, policy=policy)
    closed = window is not None and not window.open
    for position, (name, full) in enumerate(queue, start=1):
        if closed and window is not None:
            verdicts[name] = Verdict(kind=VerdictKind.CLOSED, policy=policy, position=position, queued=len(queue),
                                     why="; ".join(policy.invalid_windows), opens=window.next_opens)
        else:
            verdicts[name] = Verdict(kind=VerdictKind.WAITING, policy=policy, position=position, queued=len(queue), full=full)
    summary = Summary(selected=len(by_node), max_parallel=parallel, max_unavailable=limit, in_maintenance=len(held),
                      unavailable=len(down), queue=tuple(name for name, _ in queue), conflicts=conflicts,
                      borrowed=hooks.borrowed_identities(policy.hook_templates), window=window,
                      misplaced=hooks.misplacements(policy.hook_namespaces, operator_namespace), invalid_windows=policy.invalid_windows)
    return PoolDecision(verdicts=verdicts, summary=summary)


class _Domains:
    """The topology limits of one policy as its line is decided: per key and label value, the selected nodes, how
    many are in maintenance and unavailable, and which domains are full (the first of a domain that does not fit
    keeps the later ones of that domain waiting). Nodes without a key's label are in none of its domains."""

    def __init__(self, limits: Iterable[model.TopologyLimit], selected: Iterable[Mapping[str, Any]], held: Collection[str],
                 down: Collection[str]) -> None:
        self.limits = tuple(limits)
        self.size: dict[tuple[str, str], int] = {}
        self.used: dict[tuple[str, str], int] = {}
        self.out: dict[tuple[str, str], int] = {}
        self.blocked: dict[tuple[str, str], str] = {}
        for node in selected:
            name = node["metadata"]["name"]
            for _, domain in self._of(node):
                self.size[domain] = self.size.get(domain, 0) + 1
                self.used[domain] = self.used.get(domain, 0) + (name in held)
                self.out[domain] = self.out.get(domain, 0) + (name in down)

    def _of(self, node: Mapping[str, Any]) -> list[tuple[model.TopologyLimit, tuple[str, str]]]:
        labels = (node.get("metadata") or {}).get("labels") or {}
        return [(limit, (limit.key, str(labels[limit.key]))) for limit in self.limits if limit.key in labels]

    def full(self, node: Mapping[str, Any], adds: int) -> str:
        """Why the node's domain cannot take it now ("" when every one can); a full domain stays full for the rest of the line."""
        for limit, domain in self._of(node):
            where = f"topology domain {domain[0]}={domain[1]}"
            if domain in self.blocked:
                return self.blocked[domain]
            parallel = model.resolve(limit.max_parallel, self.size[domain])
            unavailable_limit = model.resolve(limit.max_unavailable, self.size[domain])
            if parallel is not None and self.used[domain] + 1 > parallel:
                self.blocked[domain] = f"{where} is full: maxParallel {parallel} of its {self.size[domain]} nodes in maintenance"
            elif unavailable_limit is not None and adds and self.out[domain] + adds > unavailable_limit:
                self.blocked[domain] = f"{where} is full: maxUnavailable {unavailable_limit} of its {self.size[domain]} nodes unavailable"
            if domain in self.blocked:
                return self.blocked[domain]
        return ""

    def take(self, node: Mapping[str, Any], adds: int) -> None:
        """A slot of ``node`` in use in its domains: only those some selected node is in (a recovering node that left
        the pool may be alone in its label's value, a domain no more)."""
        for _, domain in self._of(node):
            if domain not in self.size:
                continue
            self.used[domain] += 1
            self.out[domain] += adds


def with_slot(policy: model.Policy, window: windows.WindowState | None) -> Verdict:
    """The verdict of a maintenance holding its node or granted a slot, the policy's windows standing at ``window``:
    paused while no window is open under windowEnd Pause."""
    if policy.window_end == model.WindowEnd.PAUSE and window is not None and not window.open:
        return Verdict(kind=VerdictKind.ADMITTED, policy=policy, paused=True, why="; ".join(policy.invalid_windows), opens=window.next_opens)
    return Verdict(kind=VerdictKind.ADMITTED, policy=policy)


def holding(policies: Iterable[model.Policy], node: Mapping[str, Any], now: datetime.datetime) -> Verdict | None:
    """The verdict of the NodeMaintenance that holds ``node`` (its record names it), as ``decide`` gives it at ``now``
    (none when no policy governs the node). No line decides it, so it needs no look at every other maintenance: a
    draining maintenance steps at every change of its pods, and its step's cost stays apart from the pool's size."""
    policies = list(policies)
    names = model.governing(policies, node)
    selecting = sorted((p for p in policies if p.name in names), key=lambda p: p.name)
    if not selecting:
        return None
    if len(selecting) > 1:  # the last of them in name order, as decide's pass over the policies leaves it
        return Verdict(kind=VerdictKind.CONFLICT, policy=selecting[-1], policies=tuple(p.name for p in selecting))
    return with_slot(selecting[0], selecting[0].window(now))
