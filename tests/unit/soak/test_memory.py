"""The soak's memory comparison: levels at each end, not the moments its two readings fall on."""

from __future__ import annotations

import pytest

from soak.memory import comparison_seconds, growth, warm_up_seconds

MIB = 2**20


def test_a_passing_burst_at_either_end_does_not_move_the_level() -> None:
    steady = [65 * MIB] * 30
    samples = [72 * MIB, *steady[1:-1], 72 * MIB]  # a burst of TLS connections in the first and last second
    assert growth(samples).ratio == pytest.approx(1.0)


def test_steady_growth_shows() -> None:
    samples = [(60 + i) * MIB for i in range(30)]
    found = growth(samples)
    assert found.start_bytes == pytest.approx(64.5 * MIB) and found.end_bytes == pytest.approx(84.5 * MIB)
    assert found.ratio > 1.10


def test_a_short_run_compares_its_halves() -> None:
    assert growth([60 * MIB, 61 * MIB, 70 * MIB, 71 * MIB]).ratio == pytest.approx(70.5 / 60.5)


def test_one_sample_cannot_be_compared() -> None:
    with pytest.raises(ValueError, match="at least two samples"):
        growth([60 * MIB])


@pytest.mark.parametrize(("soak_minutes", "warm_up"), [(1, 60), (6, 60), (9, 90), (30, 120)])
def test_the_warm_up_is_a_sixth_of_the_soak_between_one_and_two_minutes(soak_minutes: float, warm_up: float) -> None:
    assert warm_up_seconds(soak_minutes * 60) == warm_up


def test_the_comparison_takes_what_is_left_of_the_soak_and_at_least_half_a_minute() -> None:
    assert comparison_seconds(1800, elapsed=1000) == 800
    assert comparison_seconds(60, elapsed=100) == 30
