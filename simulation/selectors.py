"""What a simulated API server needs to answer as the real one does: label and field selectors as a request's query
writes them, and JSON merge patches (RFC 7386), the operator's patches."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def _term_matches(term: str, labels: Mapping[str, str]) -> bool:
    """One term of a label selector: ``key``, ``!key``, ``key=value``, ``key==value`` or ``key!=value``."""
    if "!=" in term:
        key, value = term.split("!=", 1)
        return labels.get(key) != value
    if "=" in term:
        key, value = term.replace("==", "=").split("=", 1)
        return labels.get(key) == value
    if term.startswith("!"):
        return term[1:] not in labels
    return term in labels


def labels_match(selector: str, obj: Mapping[str, Any]) -> bool:
    """Whether ``obj``'s labels match a labelSelector query (its terms separated by commas, all of which must hold)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(_term_matches(term.strip(), labels) for term in selector.split(",") if term.strip())


def _field(obj: Mapping[str, Any], path: str) -> str:
    """A field as the API server compares it: its text, "" when absent, booleans as true/false."""
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def fields_match(selector: str, obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` matches a fieldSelector query (``path=value`` and ``path!=value`` terms)."""
    for term in (t.strip() for t in selector.split(",") if t.strip()):
        if "!=" in term:
            path, value = term.split("!=", 1)
            if _field(obj, path) == value:
                return False
        else:
            path, value = term.replace("==", "=").split("=", 1)
            if _field(obj, path) != value and not (value == "false" and _field(obj, path) == ""):
                return False
    return True


def merged(target: Any, patch: Any) -> Any:
    """``target`` with the JSON merge patch ``patch`` applied (RFC 7386): objects merge key by key, null removes a key,
    anything else replaces. Neither argument is changed."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merged(result.get(key), value)
    return result
