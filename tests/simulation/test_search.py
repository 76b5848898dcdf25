"""The bounded search: a few dozen histories from fixed seeds, every promise checked after every simulated second and
liveness at the end of each; any violation fails the test with the shortest history hypothesis shrank it to.

A seed ``make simulate`` ever finds a violation with joins SEEDS once the violation is fixed."""

from __future__ import annotations

import logging

import pytest

from simulation.__main__ import search

SEEDS = [1, 2, 3, 4]
EXAMPLES = 10


@pytest.mark.parametrize("seed", SEEDS)
def test_no_history_from_a_fixed_seed_breaks_a_promise(seed: int) -> None:
    logging.disable(logging.WARNING)
    try:
        assert search(seed, examples=EXAMPLES) == ""
    finally:
        logging.disable(logging.NOTSET)
