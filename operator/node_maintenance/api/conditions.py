"""Status conditions as Kubernetes writes them: one entry per type, its transition time moving only when its status flips."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Condition:
    """One condition to set on a status: the parts its author decides (the time and generation come from the write)."""

    type: str
    status: str
    reason: str
    message: str


def with_conditions(previous: list[dict[str, Any]], conditions: Iterable[Condition], *, generation: int, now: str) -> list[dict[str, Any]]:
    """``previous`` with each of ``conditions`` set in turn."""
    for c in conditions:
        previous = set_condition(previous, c.type, c.status, c.reason, c.message, generation=generation, now=now)
    return previous


def set_condition(previous: list[dict[str, Any]], type_: str, status: str, reason: str, message: str, *,
                  generation: int, now: str) -> list[dict[str, Any]]:
    """The conditions list with ``type_`` set; lastTransitionTime moves only when the status flips."""
    old = next((c for c in previous if c.get("type") == type_), None)
    condition = {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": old["lastTransitionTime"] if old and old.get("status") == status else now,
    }
    return [c for c in previous if c.get("type") != type_] + [condition]
