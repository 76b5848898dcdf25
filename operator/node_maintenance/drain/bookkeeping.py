"""How a drain step is carried out, decided by pure functions: the evictions it counts against budgets, whether
someone else wrote the status, and when its status is written.

The engine keeps the state; these functions decide from it, so each rule is a unit test (what the drain remembers
afterwards is ``memory``'s).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from node_maintenance.api.conversion import status_fields
from node_maintenance.drain.plans import Attempt, Maintenance, Removal

# While the phase stays the same, the status is written at most this often (a drain of many pods
# would otherwise write it once per pod); a new phase is written at once.
NM_STATUS_INTERVAL_SECONDS = 2.0
# A maintenance in line writes a new wording of the same wait (another domain full, the next window's opening) at
# most this often: a change of the pool's counts can reword every one in line, and a thousand writing at each would
# load the API server for nothing anyone waits on. (Its place in line is never in its status.)
IN_LINE_STATUS_INTERVAL_SECONDS = 30.0
# Nor do all those in line together write such rewordings more often than this, on average: a long line spaces
# each one's writes further apart (a thousand in line: each every 200 s).
IN_LINE_WRITES_PER_SECOND = 5.0


@dataclass(frozen=True)
class Counted:
    """A removal counted against a budget: an eviction until the budget lists the pod as disrupted; a deletion past
    the budget (``bypassing``, an escalation step) for a while (``runtime.budget_watch``): until the disruption
    controller counts the pod gone, the budget still counts it healthy, and would let another drain's eviction
    through on a count that no longer holds."""

    budget: str
    pod: str
    bypassing: bool = False


def counted(removals: Iterable[Removal]) -> list[Counted]:
    """The evictions a plan sends that count against a budget, and its deletions past budgets, counted before any is
    sent, so that concurrent drains see them."""
    return [counting for r in removals for counting in _counting(r)]


def uncounted(removals: Iterable[Removal], results: Mapping[str, Attempt | None] | None) -> list[Counted]:
    """The counted removals to take back: those the API did not accept, or never saw (``results`` None:
    the step stopped before any removal was sent)."""
    return [counting for r in removals if not (results is not None and (a := results.get(r.uid)) is not None and a.accepted)
            for counting in _counting(r)]


def _counting(removal: Removal) -> list[Counted]:
    if removal.budget:
        return [Counted(removal.budget, removal.name)]
    return [Counted(budget, removal.name, bypassing=True) for budget in removal.bypassed] if removal.escalation else []


def next_write_in(written_at: float, interval: float, now: float) -> float:
    """Seconds until a status that says nothing new may be written again, ``interval`` after the last write (at
    ``written_at``; at most 0: now). Both the step deciding whether to write and the drain deciding when to look again
    ask this one sum: reckoned two ways, floating point could make one say "not yet" and the other "now", forever. It is
    reckoned to the millisecond, so that a remainder below that (15.448582 + 2.0 - 17.448582 is 3.6e-15) says "now" to
    both; the engine's shortest wait (``memory.SHORTEST_WAIT_SECONDS``) keeps any other deadline's remainder from a spin."""
    return round(written_at + interval - now, 3)


def status_due(phase: str, stored: Mapping[str, Any], write_in: float, has_events: bool) -> bool:
    """Whether a step writes its status now: a new phase, an event (whose cause is recorded at once, so it
    fires once), or the interval since the last write has passed (``write_in``: :func:`next_write_in`)."""
    return has_events or phase != stored.get("phase") or write_in <= 0


def records_more(stored: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """Whether ``status`` records workloads of pods the step makes leave that ``stored`` does not (evictedWorkloads): it is
    written before they leave, whatever the interval, or a restart would forget them."""
    return bool(status.get("evictedWorkloads")) and status.get("evictedWorkloads") != stored.get("evictedWorkloads")


def in_line_interval(queued: int) -> float:
    """How often a maintenance in a line of ``queued`` writes a new wording of the same wait at most."""
    return max(IN_LINE_STATUS_INTERVAL_SECONDS, queued / IN_LINE_WRITES_PER_SECOND)


def waiting_pace(m: Maintenance) -> float:
    """The pace of an in-line maintenance's status writes that only reword its wait (another domain full, the next
    window): the wait's own recheck, or now and then."""
    waiting = m.terms.waiting
    return (waiting.recheck_in if waiting else None) or IN_LINE_STATUS_INTERVAL_SECONDS


def status_interval(stored: Mapping[str, Any], status: Mapping[str, Any], in_line: float = IN_LINE_STATUS_INTERVAL_SECONDS) -> float:
    """How long a status waits after the last write: ``in_line`` when it says nothing new but its messages (a place
    in line reworded), else NM_STATUS_INTERVAL_SECONDS."""
    def gist(s: Mapping[str, Any]) -> tuple[Any, ...]:
        return s.get("phase"), [(c.get("type"), c.get("status"), c.get("reason")) for c in s.get("conditions") or []]

    return in_line if gist(stored) == gist(status) else NM_STATUS_INTERVAL_SECONDS


def foreign_status(observed: Mapping[str, Any], written: Iterable[Mapping[str, Any]], version: str) -> bool:
    """Whether someone else wrote the status the object shows: a field this engine writes holds a value
    none of its recent writes gave it (``lastUpdate`` aside). Fields it never writes are not its concern."""
    held = status_fields(version)
    recent = list(written)
    return bool(recent) and not any(_shows(observed, ours, held) for ours in recent)


def applied(observed: Mapping[str, Any], sent: Sequence[Mapping[str, Any]], version: str) -> int | None:
    """Which of the statuses sent whose answer never came (a timeout, an answer lost on the way), oldest first, the
    object shows, the newest (its index): that write was applied, and what it recorded (a drain succeeded, its
    workloads) holds. None: none shows."""
    held = status_fields(version)
    return next((index for index in reversed(range(len(sent))) if _shows(observed, sent[index], held)), None)


def _shows(observed: Mapping[str, Any], ours: Mapping[str, Any], held: frozenset[str]) -> bool:
    """Whether ``observed`` holds every value ``ours`` wrote to a field ``held`` (``lastUpdate`` aside)."""
    return all(observed.get(key) == value for key, value in ours.items() if key in held and key != "lastUpdate")
