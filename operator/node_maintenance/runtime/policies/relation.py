"""A relation kept both ways, as the policies' watches need it: each key's values, and each value's keys.

The watches answer "which policies select this node" and "which nodes does this policy select" (and the same for a
NodeMaintenance and its node, a node and the holder it records) at every change, in the time of the answer, not of the
cluster. Keeping the two directions by hand in two dicts is how one of them drifts; here one ``set`` changes both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


class Relation:
    """Keys to an ordered tuple of values, and each value back to its keys."""

    def __init__(self, pairs: Iterable[tuple[str, tuple[str, ...]]] = ()) -> None:
        self._of: dict[str, tuple[str, ...]] = {}
        self._having: dict[str, set[str]] = {}
        for key, values in pairs:
            self.set(key, values)

    def set(self, key: str, values: tuple[str, ...]) -> tuple[str, ...]:
        """``key`` now relates to ``values`` (none: it is kept, relating to nothing); returns what it related to before."""
        before = self.drop(key)
        self._of[key] = values
        for value in values:
            self._having.setdefault(value, set()).add(key)
        return before

    def drop(self, key: str) -> tuple[str, ...]:
        """``key`` is gone; returns what it related to."""
        before = self._of.pop(key, ())
        for value in before:
            keys = self._having[value]
            keys.discard(key)
            if not keys:
                del self._having[value]
        return before

    def of(self, key: str) -> tuple[str, ...]:
        return self._of.get(key, ())

    def having(self, value: str) -> frozenset[str]:
        """The keys relating to ``value``."""
        return frozenset(self._having.get(value, ()))

    @property
    def forward(self) -> Mapping[str, tuple[str, ...]]:
        """Every key with its values."""
        return self._of
