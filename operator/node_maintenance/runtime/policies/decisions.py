"""The policies' decision, made once for every burst of changes, and whom it moved.

The decision (``policy.line.decide``) is kept until something it reads changes. After a change of one object, the
maintenances it touches and those whose standing it changed are told (a place in line aside, which they look at now
and then): a thousand in line are not all woken by every node their policy takes or gives back. A burst of changes
is decided once, before the event loop's next turn. Timers decide again at the next window boundary of any policy,
and when the soonest waitForHealthy cap passes.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol

from node_maintenance.api import timestamps
from node_maintenance.drain import memory
from node_maintenance.policy import line, verdicts, wording
from node_maintenance.runtime.policies.recovery import Recovery
from node_maintenance.runtime.policies.watches import PolicyWatches, Watched


class Known(Protocol):
    """Whether the policies are served and known now, and the operator's namespace, where no hook Job runs."""

    namespace: str

    @property
    def served(self) -> bool: ...

    def unknown(self) -> str: ...


class Decisions:
    """The decision cache, its timers, and the telling of whom a decision moved."""

    def __init__(self, known: Known, on_change: Callable[[Collection[str] | None], None]) -> None:
        """``on_change`` is told the maintenances whose say from the policies may have changed (None: any)."""
        self.known = known
        self.on_change = on_change
        self.dirty = asyncio.Event()  # the policies' statuses may be out of date
        self._decision: verdicts.Decision | None = None
        self._blind = False  # that decision was made while the policies were unknown: made again once they are known
        self._seen: dict[str, verdicts.Verdict] = {}  # the verdicts of the last decision made, current or not
        self._all_told = False  # every maintenance was told since that decision: the next need not compare
        self._to_tell: set[str] = set()  # maintenances to tell once the changes seen meanwhile are decided
        self._telling: asyncio.Handle | None = None
        self._boundary: asyncio.TimerHandle | None = None  # decides again when the next window opens or closes
        self._cap: asyncio.TimerHandle | None = None  # decides again when the soonest waitForHealthy cap passes
        self._admitted: dict[str, str] = {}  # granted a slot by the last decision, and by which policy: it stands until taken or given back
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
        self.watches = self.recovery = None

    # ----------------------------------------------------------------- hearing of changes
    def invalidate(self) -> None:
        """What the decision reads changed: it is made again when next asked, and the statuses written again."""
        self._decision = None
        self.dirty.set()

    def changed_all(self) -> None:
        """A policy or hook Job changed, or a watch listed: any maintenance's say may have changed."""
        self.invalidate()
        if self.known.served:
            self._all_told = True
            self.on_change(None)

    def changed(self, key: str | None, touched: set[str]) -> None:
        """After a change of one object (``key``; None: a listing), tell the maintenances ``touched`` by it and those
        whose standing it changed."""
        if key is None or not self.known.served or self.known.unknown():
            self.changed_all()
            return
        self.invalidate()
        self._tell(touched)

    def workload_changed(self, key: str | None) -> None:
        """A workload a recovering node waits for changed: judged again (those in line told if that moves them)."""
        self.invalidate()
        if self.known.served and key is not None:
            self._tell(set())
        elif self.known.served:
            self.changed_all()

    def _tell(self, names: set[str]) -> None:
        self._to_tell |= names
        if self._telling is None:
            self._telling = asyncio.get_running_loop().call_soon(self._told)

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
            policies = self.watches.policies()
            governing = self.watches.governing()
            now = timestamps.now()
            judged = self.recovery.judge(policies, self.stored_status, now, self.watches.held)
            self._wake_at_cap(judged.expires_in)
            self._decision = line.decide(policies, self.watches.objects(Watched.NODES).values(),
                                         self.watches.objects(Watched.MAINTENANCES).values(), self._admitted, governing,
                                         judged.recovering, now=now, operator_namespace=self.known.namespace)
            self._wake_at_boundary(self._decision, now)
            # A grant stands once made (policy.line); one made from what a watch that failed, or has not listed, last
            # showed is not made: an older maintenance it never brought may be first in line (its status is written
            # meanwhile, and the drains hold while the policies are unknown). Grants made before are kept only while
            # this decision still admits them (a maintenance deleted meanwhile gives its grant up), and the decision
            # is made again as soon as the policies are known, whatever made them known.
            admitted = {name: v.policy.name for name, v in self._decision.verdicts.items()
                        if v.kind == verdicts.VerdictKind.ADMITTED and v.policy is not None}
            self._admitted = admitted if known else {name: p for name, p in self._admitted.items() if admitted.get(name) == p}
            self._blind = not known
            before, after, self._seen = self._seen, self._decision.verdicts, self._decision.verdicts
            if not self._all_told:  # those it moved are told; a decision made after every one was told need not
                self._tell({n for n in before.keys() | after.keys() if verdicts.acted_on(before.get(n)) != verdicts.acted_on(after.get(n))})
            self._all_told = False
        return self._decision

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
        self._cap = asyncio.get_running_loop().call_later(wait, self.changed, "", set()) if wait is not None else None

    @property
    def boundary(self) -> float | None:
        """When (the loop's clock) the next window boundary is decided again; None: no timer."""
        return self._boundary.when() if self._boundary is not None else None
