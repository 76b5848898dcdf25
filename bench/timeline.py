"""Where the time of one drain goes: for each wave of evictions under the `maxUnavailable: 1` budgets, when a
budget allowed an eviction again, when the operator saw that, and when it sent the eviction.

- allowed: the disruption controller's status update that made the version of the budget the operator saw
  allowing (the audit log's stageTimestamp; an update names the version it replaced, so the one that made
  version B is the one that replaced the version seen just before B);
- saw: the operator's DEBUG line for that version (its budget watch, ``runtime/budget_watch.py``);
- sent: the API server's receipt of the operator's next accepted eviction of a pod under that budget.

The API server and the operator run on one machine, so their time stamps share a clock. Along the budget
whose last eviction went last, the drain's time adds up exactly: the operator's start (NodeMaintenance
created → first eviction), then per wave the control plane's recovery (eviction sent → allowed again), the
notice lag (allowed → saw) and the operator's reaction (saw → sent), and the last pods' end. The gap to the
budget-recovery limit splits into the operator's start and reactions, the notice lags, and the rest, which
is the control plane's: its recoveries and the last pods' end beyond the limit's waves and grace period.
"""

from __future__ import annotations

import bisect
import datetime
import itertools
import json
import statistics
from pathlib import Path
from typing import Any

from .cluster import DISRUPTION_CONTROLLER_USER, OPERATOR_USER

BUDGET_LINE = "budget seen"  # the message of the operator's DEBUG line


def _stamp(text: str) -> float:
    return datetime.datetime.fromisoformat(text).timestamp()


def seen(log: Path) -> dict[str, list[tuple[float, str, int]]]:
    """Each budget ("namespace/name") as the operator's budget watch saw it, in order: (when, resourceVersion,
    disruptionsAllowed)."""
    versions: dict[str, list[tuple[float, str, int]]] = {}
    for line in log.read_text(errors="replace").splitlines():
        if BUDGET_LINE not in line:
            continue
        entry = json.loads(line)
        if entry.get("msg") == BUDGET_LINE:
            # A budget without a status yet has no disruptionsAllowed (the log leaves a None out).
            versions.setdefault(entry["budget"], []).append((_stamp(entry["time"]), entry["resourceVersion"], entry.get("disruptionsAllowed", 0)))
    return versions


def _ok(event: dict[str, Any]) -> bool:
    return event.get("stage") == "ResponseComplete" and 200 <= (event.get("responseStatus") or {}).get("code", 0) < 300


def _audited(events: list[dict[str, Any]], namespace: str, budgets: list[str]) -> tuple[dict[str, dict[str, float]], dict[str, list[float]]]:
    """From the audit log: per budget, when each status update by the disruption controller was done, by the
    version it replaced; and when each accepted eviction of the operator under it was received, in order."""
    updates: dict[str, dict[str, float]] = {b: {} for b in budgets}
    evictions: dict[str, list[float]] = {b: [] for b in budgets}
    for event in events:
        ref = event.get("objectRef") or {}
        if ref.get("namespace") != namespace or not _ok(event):
            continue
        user = event["user"]["username"]
        if user == DISRUPTION_CONTROLLER_USER and ref.get("resource") == "poddisruptionbudgets" and ref.get("name") in updates:
            updates[ref["name"]][ref.get("resourceVersion", "")] = _stamp(event["stageTimestamp"])
        elif user == OPERATOR_USER and ref.get("subresource") == "eviction":
            # A Deployment's pods are named after it ("web-3-<hash>-<id>"), and so is its budget.
            budget = next((b for b in budgets if ref.get("name", "").startswith(f"{b}-")), None)
            if budget:
                evictions[budget].append(_stamp(event["requestReceivedTimestamp"]))
    return updates, {b: sorted(times) for b, times in evictions.items()}


def _waves(versions: list[tuple[float, str, int]], updates: dict[str, float], sent: list[float], created: float) -> list[dict[str, float | None]]:
    """One budget's waves: the first eviction, then each time the operator saw the budget go from allowing
    nothing to allowing an eviction (allowed, saw, sent, and the eviction before: what the recovery followed)."""
    waves: list[dict[str, float | None]] = [{"allowed": None, "saw": None, "sent": sent[0] if sent else None, "before": None}]
    for (_, version, was), (when, _, allows) in itertools.pairwise(versions):
        if when < created or was > 0 or allows < 1 or not sent or when > sent[-1]:
            continue  # not a release the drain waited on: before it, or after the budget's last eviction
        allowed = updates.get(version)
        after = bisect.bisect_left(sent, when)
        before = bisect.bisect_left(sent, allowed if allowed is not None else when)
        waves.append({"allowed": allowed, "saw": when, "sent": sent[after] if after < len(sent) else None,
                      "before": sent[before - 1] if before else None})
    return waves


def _gap(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def _median(values: list[float | None], scale: float = 1, digits: int = 2) -> float | None:
    present = [v for v in values if v is not None]
    return round(scale * statistics.median(present), digits) if present else None


def analyse(events: list[dict[str, Any]], versions: dict[str, list[tuple[float, str, int]]], namespace: str, budgets: list[str],
            created: float, seconds: float, limit: float) -> dict[str, Any]:
    """The timeline of one drain of ``namespace``'s node: NodeMaintenance created at ``created`` (wall clock),
    Succeeded ``seconds`` later; ``limit`` is the budget-recovery limit of its shape."""
    updates, evictions = _audited(events, namespace, budgets)
    chains = {b: _waves(versions.get(f"{namespace}/{b}", []), updates[b], evictions[b], created) for b in budgets}
    rows = []
    for index in range(max(len(c) for c in chains.values())):
        waves = [c[index] for c in chains.values() if index < len(c)]
        rows.append({"wave": index + 1, "budgets": len(waves),
                     **{f"{k}_s": _median([_gap(created, w[k]) for w in waves]) for k in ("allowed", "saw", "sent")},
                     "recovery_s": _median([_gap(w["before"], w["allowed"]) for w in waves]),
                     "notice_ms": _median([_gap(w["allowed"], w["saw"]) for w in waves], 1000, 1),
                     "reaction_ms": _median([_gap(w["saw"], w["sent"]) for w in waves], 1000, 1)})
    releases = [w for c in chains.values() for w in c[1:]]
    # The budget whose last eviction went last: along it the drain's time adds up.
    critical = max(budgets, key=lambda b: max((w["sent"] or 0.0) for w in chains[b]))
    chain = chains[critical]
    start = _gap(created, chain[0]["sent"]) or 0.0
    reaction = sum(_gap(w["saw"], w["sent"]) or 0.0 for w in chain[1:])
    notice = sum(_gap(w["allowed"], w["saw"]) or 0.0 for w in chain[1:])
    gap = seconds - limit
    return {
        "drain_seconds": round(seconds, 2), "limit_seconds": round(limit, 2), "gap_seconds": round(gap, 2), "waves": rows,
        "releases": len(releases), "unmatched": sum(w["allowed"] is None or w["sent"] is None for w in releases),
        "median_reaction_ms": _median([_gap(w["saw"], w["sent"]) for w in releases], 1000, 1),
        "median_notice_lag_ms": _median([_gap(w["allowed"], w["saw"]) for w in releases], 1000, 1),
        "median_recovery_s": _median([_gap(w["before"], w["allowed"]) for w in releases]),
        "critical_budget": critical,
        "gap_split": {"operator_start_s": round(start, 2), "operator_reaction_s": round(reaction, 2), "notice_lag_s": round(notice, 2),
                      "control_plane_s": round(gap - start - reaction - notice, 2)},
    }
