"""make simulate's report of a seed: the broken promise and the shortest history, for each distinct failure found."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from simulation.__main__ import search
from simulation.search import MACHINES


class TwoWays(RuleBasedStateMachine):
    """Breaks one promise or another, by the rule drawn: hypothesis, shrinking, finds both and raises them together."""

    def __init__(self) -> None:
        super().__init__()
        self.way = -1

    @rule(way=st.integers(0, 1))
    def choose(self, way: int) -> None:
        self.way = way

    @invariant()
    def first(self) -> None:
        assert self.way != 0, "the first promise broken"

    @invariant()
    def second(self) -> None:
        assert self.way != 1, "the second promise broken"


def test_a_seed_that_found_several_failures_reports_each_with_its_history(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seed 1343346368 of Late stopped the whole hour: hypothesis raised its two failures as one ExceptionGroup."""
    monkeypatch.setitem(MACHINES, "two-ways", TwoWays)
    found = search(1, machine="two-ways")
    assert "the first promise broken" in found and "the second promise broken" in found, found
    assert found.count("state = TwoWays()") == 2 and "state.choose(way=0)" in found and "state.choose(way=1)" in found, found
