"""The policies' decision, made once for every burst of changes, and whom it moved.

The decision is kept until something it reads changes, pool by pool: each policy's line is decided apart
(``policy.line.decide_pool``), and a change re-decides only the pools it touches (the lines of the policies selecting
the node it concerns, before and after), so a fleet's decision costs what changed, not the whole cluster. A change of
a policy, a listing, a window's boundary or the policies becoming known re-decide every pool; a pool whose recovering
nodes (waitForHealthy) changed is decided again too. After a change of one object, the maintenances it touches and
those whose standing it changed are told (a place in line aside): a thousand in line are not all woken by every node
their policy takes or gives back. A burst of changes is decided once, before the event loop's next turn; once the
lines are long, once they have all come in (``pace``). A maintenance the last decision kept waiting is told so from it
while the next is pending (``verdict``): five thousand created at once are not decided again for each one's step.
Timers decide again at the next window boundary of any policy, and when the soonest waitForHealthy cap passes.
"""

from __future__ import annotations

import asyncio
import collections
import datetime
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from node_maintenance.api import timestamps
from node_maintenance.drain import memory
from node_maintenance.policy import line, model, verdicts, wording
from node_maintenance.policy.windows import WindowState
from node_maintenance.runtime import metrics
from node_maintenance.runtime.policies.recovery import Recovery
from node_maintenance.runtime.policies.watches import PolicyWatches, Watched


class Known(Protocol):
    """Whether the policies are served and known now, and the operator's namespace, where no hook Job runs."""

    namespace: str

    @property
    def served(self) -> bool: ...

    def unknown(self) -> str: ...


# What deciding costs per maintenance decided (a line of 5,000 took 100 to 120 ms of CPU in a fleet's queue), and
# how many times that the changes after a decision wait for the next: at most a third of the time goes to deciding,
# however fast the changes come. A pace shorter than SOON_SECONDS is no pace: the next turn of the event loop decides.
DECISION_SECONDS_PER_VERDICT = 25e-6
DECISION_PACE = 2
SOON_SECONDS = 0.01
# Verdicts that act on nothing: a maintenance told one of them from a decision a change has made old writes its wait
# and takes nothing, and the decision that change brings tells it if it moves.
IN_LINE = frozenset({verdicts.VerdictKind.WAITING, verdicts.VerdictKind.CLOSED})


def pace(decided: int) -> float:
    """How long the changes after a decision of ``decided`` verdicts wait to be decided together (0: the next turn)."""
    wait = DECISION_PACE * DECISION_SECONDS_PER_VERDICT * decided
    return wait if wait >= SOON_SECONDS else 0.0


@dataclass(frozen=True)
class Decided:
    """One pool's last decision and what it was decided from beyond its pool's objects (a change of any decides it again)."""

    policy: model.Policy
    recovering: Mapping[str, Mapping[str, Any] | None]
    window: WindowState | None  # where its windows stood: past a boundary it is decided again
    decision: line.PoolDecision


class Decisions:
    """The decision cache, its timers, and the telling of whom a decision moved."""

    def __init__(self, known: Known, on_change: Callable[[Collection[str] | None], None]) -> None:
        """``on_change`` is told the maintenances whose say from the policies may have changed (None: any)."""
        self.known = known
        self.on_change = on_change
        self.dirty = asyncio.Event()  # the policies' statuses may be out of date
        self._decision: verdicts.Decision | None = None
        self._blind = False  # that decision was made while the policies were unknown: made again once they are known
        self._seen: Mapping[str, verdicts.Verdict] = {}  # the verdicts of the last decision made, current or not
        self._all_told = False  # every maintenance was told since that decision: the next need not compare
        self._to_tell: set[str] = set()  # maintenances to tell once the changes seen meanwhile are decided
        self._telling: asyncio.Handle | None = None  # the decision the changes since the last one wait for, and its telling
        self._decided = 0  # how many verdicts the pools hold, as last decided: what deciding them costs
        self._boundary: asyncio.TimerHandle | None = None  # decides again when the next window opens or closes
        self._cap: asyncio.TimerHandle | None = None  # decides again when the soonest waitForHealthy cap passes
        self._admitted: dict[str, frozenset[str]] = {}  # by policy, granted a slot by its last decision: it stands until taken or given back
        self._pools: dict[str, Decided] = {}  # each policy's line as last decided
        self._dirty: set[str] | None = None  # the pools a change touched since (None: every one)
        self._decided_at: datetime.datetime | None = None  # the time the decision kept was made at
        self.watches: PolicyWatches | None = None
        self.recovery: Recovery | None = None
        self.stored_status: Callable[[str], Mapping[str, Any]] = lambda _name: {}

    def serve(self, watches: PolicyWatches, recovery: Recovery, stored_status: Callable[[str], Mapping[str, Any]]) -> None:
        """Decide from these from now on (the CRD is served)."""
        self.watches, self.recovery, self.stored_status = watches, recovery, stored_status

    def stop(self) -> None:
        for timer in (self._telling, self._boundary, self._cap):
            if timer is not None:
                timer.cancel()
        self._telling = self._boundary = self._cap = None
        self._decision, self._admitted, self._seen, self._to_tell, self._blind = None, {}, {}, set(), False
        self._pools, self._dirty, self._decided = {}, None, 0
        self.watches = self.recovery = None

    # ----------------------------------------------------------------- hearing of changes
    def invalidate(self) -> None:
        """What the decision reads changed: it is made again when next asked, and the statuses written again."""
        self._decision = None
        self.dirty.set()

    def changed_all(self) -> None:
        """A policy or hook Job changed, or a watch listed: any maintenance's say may have changed."""
        metrics.POLICY_CHANGES.inc()
        self._dirty = None
        self.invalidate()
        if self.known.served:
            self._all_told = True
            self.on_change(None)

    def changed(self, touched: set[str], pools: Collection[str] | None = (), *, freed: bool = False) -> None:
        """After a change of one object, tell the maintenances ``touched`` by it and those whose standing it changed;
        ``pools``: the policies whose line it may move (None: any; none: only those whose recovering nodes changed,
        which every decision compares). ``freed``: a node's holder went: decided at the loop's next turn, past the pace,
        so that a slot a hand-back frees goes to the next in line at once instead of standing empty for the pace."""
        if not self._known():
            self.changed_all()
            return
        metrics.POLICY_CHANGES.inc()
        if pools is None:
            self._dirty = None
        elif self._dirty is not None:
            self._dirty.update(pools)
        self.invalidate()
        self._tell(touched, at_once=freed)

    def recovery_changed(self) -> None:
        """The nodes recovering may have changed (a waitForHealthy cap passed, a policy's status written without one):
        decided again, and since every decision compares each pool's recovering nodes, only the pools they changed in."""
        self.changed(set())

    def workload_changed(self, key: str | None) -> None:
        """A workload a recovering node waits for changed: judged again (those in line told if that moves them)."""
        if self.known.served and key is None:
            self.changed_all()
            return
        metrics.POLICY_CHANGES.inc()
        self.invalidate()
        if self.known.served:
            self._tell(set())

    def _tell(self, names: set[str], *, at_once: bool = False) -> None:
        self._to_tell |= names
        if at_once and isinstance(self._telling, asyncio.TimerHandle):  # paced: brought forward to the next turn
            self._telling.cancel()
            self._telling = None
        if self._telling is None:
            loop, wait = asyncio.get_running_loop(), 0.0 if at_once else pace(self._decided)
            self._telling = loop.call_later(wait, self._told) if wait else loop.call_soon(self._told)

    def _told(self) -> None:
        """Decide (unless a drain's step did meanwhile, which noted whom it moved) and tell whom the changes touched."""
        self._telling = None
        if self._known():
            self.decision()
        names, self._to_tell = self._to_tell, set()
        if names:
            self.on_change(sorted(names))  # in one order, whatever the hash seed: a run replays as it went

    # ----------------------------------------------------------------- deciding
    def _known(self) -> bool:
        """Whether the policies are known now: served, every read current."""
        return self.known.served and not self.known.unknown()

    def decision(self) -> verdicts.Decision:
        known = self._known()
        if self._decision is None or (self._blind and known):
            assert self.watches is not None and self.recovery is not None, "decided only while the policies are served"
            started = time.thread_time()
            policies = self.watches.policies()
            now = timestamps.now()
            judged = self.recovery.judge(policies, self.stored_status, now, self.watches.held)
            self._wake_at_cap(judged.expires_in)
            dirty = None if self._blind and known else self._dirty
            self._dirty = set()
            moved: set[str] = set()  # the maintenances of the pools decided again, and of those gone
            for gone in self._pools.keys() - {p.name for p in policies}:
                moved.update(self._pools.pop(gone).decision.verdicts)
                self._admitted.pop(gone, None)
            for policy in policies:
                recovering, window = self.watches.nodes_named(judged.recovering.get(policy.name, ())), policy.window(now)
                kept = self._pools.get(policy.name)
                if kept is not None and dirty is not None and policy.name not in dirty and (kept.policy, kept.recovering, kept.window) == (policy, recovering, window):
                    continue
                pool = self.watches.pool(policy, self._admitted.get(policy.name, frozenset()), recovering)
                decided = line.decide_pool(pool, self.watches.exists, now=now, operator_namespace=self.known.namespace)
                metrics.LINES_DECIDED.labels(policy.name).inc()
                self._pools[policy.name] = Decided(policy, recovering, window, decided)
                moved.update(decided.verdicts, kept.decision.verdicts if kept is not None else ())
                # A grant stands once made (policy.line); one made from what a watch that failed, or has not listed,
                # last showed is not made: an older maintenance it never brought may be first in line (its status is
                # written meanwhile, and the drains hold while the policies are unknown). Grants made before are kept
                # only while this decision still admits them (a maintenance deleted meanwhile gives its grant up), and
                # every pool is decided again as soon as the policies are known, whatever made them known.
                admitted = frozenset(name for name, v in decided.verdicts.items() if v.kind == verdicts.VerdictKind.ADMITTED)
                self._admitted[policy.name] = admitted if known else admitted & self._admitted.get(policy.name, frozenset())
            # One in conflict keeps the verdict of the last of its policies in name order: looked up through the
            # pools' own verdicts, the last first, never copied (a fleet's five thousand at every change).
            merged = collections.ChainMap(*(self._pools[p.name].decision.verdicts for p in sorted(policies, key=lambda p: p.name, reverse=True)))
            self._decision = verdicts.Decision(verdicts=merged, summaries={p.name: self._pools[p.name].decision.summary for p in policies})
            self._decided = sum(len(kept.decision.verdicts) for kept in self._pools.values())
            self._wake_at_boundary(self._decision, now)
            self._blind, self._decided_at = not known, now
            before, self._seen = self._seen, merged
            if not self._all_told:  # those it moved are told; a decision made after every one was told need not
                self._tell({n for n in moved if verdicts.acted_on(before.get(n)) != verdicts.acted_on(merged.get(n))})
            self._all_told = False
            metrics.DECISION_SECONDS.inc(time.thread_time() - started)
        return self._decision

    def verdict(self, name: str) -> verdicts.Verdict | None:
        """The verdict of ``name``, a maintenance that does not hold its node. One the last decision made with the
        policies known kept waiting in line is told so from it while a change since waits to be decided: waiting takes
        nothing, and the decision pending tells it if it moves (every maintenance was not told meanwhile, which would
        spare that decision the telling). Anything else, a grant above all, is read from a decision current now."""
        if self._decision is None and self._telling is not None and not self._all_told and not self._blind and self._known():
            last = self._seen.get(name)
            if last is not None and last.kind in IN_LINE:
                return last
        return self.decision().verdicts.get(name)

    @property
    def current(self) -> verdicts.Decision | None:
        """The decision kept, while nothing it read has changed since and it was made with the policies known; else None."""
        return self._decision if not self._blind else None

    def afresh(self) -> verdicts.Decision:
        """The whole cluster decided anew, every pool at once (``line.decide``), from what the decision kept read: its
        grants, its recovering nodes, its time. Deciding pool by pool must give the same whatever changed, and the
        search checks that it does after every step (``simulation.pooled``)."""
        assert self.watches is not None and self._decided_at is not None, "asked of a decision kept"
        watches = self.watches
        admitted = {name: policy for policy, names in self._admitted.items() for name in names}
        recovering = {policy: list(pool.recovering) for policy, pool in self._pools.items()}
        return line.decide(watches.policies(), watches.objects(Watched.NODES).values(), watches.objects(Watched.MAINTENANCES).values(),
                           admitted, watches.governing(), recovering, now=self._decided_at, operator_namespace=self.known.namespace)

    def _wake_at_boundary(self, decision: verdicts.Decision, now: datetime.datetime) -> None:
        """At the next window's opening or end of any policy, decide again and tell every maintenance: those in line
        take the slots a window opens, and those holding a node under windowEnd Pause stop or resume evicting."""
        boundaries = [s.window.boundary for s in decision.summaries.values() if s.window is not None and s.window.boundary is not None]
        if self._boundary is not None:
            self._boundary.cancel()
            self._boundary = None
        if boundaries:
            delay = wording.until(min(boundaries), now)
            self._boundary = asyncio.get_running_loop().call_later(max(delay or 0.0, memory.SHORTEST_WAIT_SECONDS), self._at_boundary)

    def _at_boundary(self) -> None:
        self._boundary = None
        self.changed_all()

    def _wake_at_cap(self, expires_in: float | None) -> None:
        """Decide again when the soonest waitForHealthy cap passes. Never sooner than the engine's shortest wait: a cap
        a float's remainder away (1e-15 s) woke the decision at the same instant of a loop whose clock moves in steps,
        which judged the cap not passed yet, and so on forever (seed 1796877616 of Zoned)."""
        if self._cap is not None:
            self._cap.cancel()
        wait = memory.wait_seconds(expires_in)
        self._cap = asyncio.get_running_loop().call_later(wait, self.recovery_changed) if wait is not None else None

    @property
    def boundary(self) -> float | None:
        """When (the loop's clock) the next window boundary is decided again; None: no timer."""
        return self._boundary.when() if self._boundary is not None else None
