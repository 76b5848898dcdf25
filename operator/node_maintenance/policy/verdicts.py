"""What the policies decide, as pure values: where each NodeMaintenance stands with them (its verdict; the words its
status gives it are ``wording``'s) and each policy's count, for its status.

A maintenance acts on part of its verdict only (``acted_on``): its place in line moves for every maintenance in line
whenever one is admitted, and waking all of them each time would cost as much as the line is long.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from node_maintenance.policy.model import Policy
from node_maintenance.policy.windows import WindowState


class VerdictKind(StrEnum):
    """Where one NodeMaintenance stands with the policies."""

    WAITING = "Waiting"
    ADMITTED = "Admitted"
    CONFLICT = "Conflict"
    UNGOVERNED = "Ungoverned"
    UNKNOWN = "Unknown"  # the policies cannot be read now: whether one governs the node is not known
    GIVEN_BACK = "GivenBack"  # a check at takeover refused the node: the slot went back, and the maintenance looks again
    CLOSED = "Closed"  # in line while no maintenance window is open


@dataclass(frozen=True)
class Verdict:
    """Where one NodeMaintenance stands with the policies."""

    kind: VerdictKind
    policy: Policy | None = None
    position: int = 0  # 1-based place in the policy's queue while WAITING or CLOSED
    queued: int = 0  # how many wait in that queue
    policies: tuple[str, ...] = ()  # every policy selecting the node, for CONFLICT
    why: str = ""  # what keeps the policies unknown, for UNKNOWN; why its windows cannot be read, for CLOSED
    full: str = ""  # the topology domain that keeps it WAITING ("" for the pool-wide limits)
    paused: bool = False  # ADMITTED (holding its node or granted a slot), no window open under windowEnd Pause: evicts nothing
    opens: datetime.datetime | None = None  # when the next window opens, for CLOSED and paused


def acted_on(verdict: Verdict | None) -> tuple[Any, ...] | None:
    """What of a verdict its maintenance acts on: all of it but its place in line (whether it may be taken at once
    aside), which moves for every maintenance in line whenever one is admitted; and, unless admitted, the policy's
    name only (one in line reads nothing else of it: a change of its limits that leaves it in line changes nothing)."""
    if verdict is None:
        return None
    policy = verdict.policy if verdict.kind == VerdictKind.ADMITTED or verdict.policy is None else verdict.policy.name
    return verdict.kind, policy, verdict.position == 0, verdict.policies, verdict.why, verdict.paused


@dataclass(frozen=True)
class Summary:
    """One policy's counts, line and windows, for its status."""

    selected: int
    max_parallel: int | None
    max_unavailable: int | None
    in_maintenance: int
    unavailable: int
    queue: tuple[str, ...]
    conflicts: tuple[tuple[str, tuple[str, ...]], ...]  # (node, every policy selecting it)
    borrowed: tuple[str, ...] = ()  # why each hook whose template names the operator's ServiceAccount is refused
    window: WindowState | None = None  # where its windows stand (None: it has none, always open)
    invalid_windows: tuple[str, ...] = ()
    misplaced: tuple[str, ...] = ()  # why each hook naming no namespace, or the operator's, is refused


@dataclass(frozen=True)
class Decision:
    verdicts: Mapping[str, Verdict]  # NodeMaintenance name -> verdict
    summaries: dict[str, Summary]  # policy name -> summary
