"""Command-line values as kubectl writes them, turned into API fields: label selectors and durations."""

from __future__ import annotations

import re
from typing import Any

from node_maintenance.drain.plans import Action

_KEY = r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_EXISTS = re.compile(rf"(?P<neg>!?)\s*(?P<key>{_KEY})")
_EQUALS = re.compile(rf"(?P<key>{_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>{_VALUE})")
_SET = re.compile(rf"(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)")
_DURATION = re.compile(r"(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+)s)?")


def _requirements(text: str) -> list[str]:
    """Split at the commas that separate requirements, not those inside ``in (a,b)``."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def label_selector(text: str) -> dict[str, Any]:
    """A metav1.LabelSelector from kubectl's selector syntax (``app=web,tier!=db,env in (a,b),!legacy``)."""
    match_labels: dict[str, str] = {}
    expressions: list[dict[str, Any]] = []
    for raw in _requirements(text):
        requirement = raw.strip()
        if match := _SET.fullmatch(requirement):
            values = [v.strip() for v in match["values"].split(",") if v.strip()]
            if not values or not all(re.fullmatch(_VALUE, v) for v in values):
                raise ValueError(f"{requirement!r}: give one or more label values inside the parentheses, e.g. 'env in (prod,staging)'")
            expressions.append({"key": match["key"], "operator": "In" if match["op"] == "in" else "NotIn", "values": values})
        elif match := _EQUALS.fullmatch(requirement):
            key, value = match["key"], match["value"]
            if match["op"] == "!=":
                expressions.append({"key": key, "operator": "NotIn", "values": [value]})
            elif key in match_labels:
                expressions.append({"key": key, "operator": "In", "values": [value]})
            else:
                match_labels[key] = value
        elif match := _EXISTS.fullmatch(requirement):
            expressions.append({"key": match["key"], "operator": "DoesNotExist" if match["neg"] else "Exists"})
        else:
            raise ValueError(
                f"{requirement!r} is not a label requirement; write key=value, key!=value, "
                "'key in (a,b)', 'key notin (a,b)', key or !key, separated by commas"
            )
    selector: dict[str, Any] = {}
    if match_labels:
        selector["matchLabels"] = match_labels
    if expressions:
        selector["matchExpressions"] = expressions
    return selector


def duration_seconds(text: str) -> int:
    """Seconds from ``90``, ``90s``, ``10m`` or ``1h30m``."""
    if text.isdigit():
        return int(text)
    match = _DURATION.fullmatch(text)
    if not text or not match:
        raise ValueError(f"{text!r} is not a duration; write seconds (90) or hours, minutes and seconds (1h30m, 10m, 45s)")
    return 3600 * int(match["h"] or 0) + 60 * int(match["m"] or 0) + int(match["s"] or 0)


def escalation(text: str) -> list[dict[str, Any]]:
    """spec.drain.escalation from ``5m:DeletePods,10m:ForceDeletePods`` (each step's time after the drain's start)."""
    steps = []
    for part in text.split(","):
        after, _, action = part.strip().partition(":")
        if action not in (Action.DELETE_PODS, Action.FORCE_DELETE_PODS):
            raise ValueError(f"{part!r} is not an escalation step; write DURATION:{Action.DELETE_PODS} or DURATION:{Action.FORCE_DELETE_PODS}, "
                             "separated by commas, e.g. 5m:DeletePods,10m:ForceDeletePods")
        steps.append({"afterSeconds": duration_seconds(after), "action": action})
    return steps
