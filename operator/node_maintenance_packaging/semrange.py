"""Semver ranges as OLM's olm.skipRange writes them: ``>=0.1.0 <0.3.0``, alternatives joined by ``||``."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable

import semver

_COMPARATORS: dict[str, Callable[[semver.Version, semver.Version], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
    "==": operator.eq,
    "=": operator.eq,
    "": operator.eq,
}
_TERM = re.compile(r"^(>=|<=|!=|>|<|==|=)?v?(.+)$")


def matches(version: semver.Version, expression: str) -> bool:
    """Whether ``version`` lies in the range; raises ValueError for a malformed range."""
    alternatives = [alt.split() for alt in expression.split("||")]
    if not all(alternatives):
        raise ValueError(f"empty alternative in range {expression!r}")
    return any(all(_term(version, term) for term in terms) for terms in alternatives)


def _term(version: semver.Version, term: str) -> bool:
    match = _TERM.match(term)
    if match is None or not semver.Version.is_valid(match.group(2)):
        raise ValueError(f"bad term {term!r}")
    return _COMPARATORS[match.group(1) or ""](version, semver.Version.parse(match.group(2)))
