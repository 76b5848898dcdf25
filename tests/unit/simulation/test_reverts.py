"""The revert table of ``python -m simulation.reverts`` stays current: each known break's fix is found once where the
table names it, so a revert run undoes the fix it says, not a line that moved on (break 1's fix had, unnoticed)."""

from __future__ import annotations

import pytest

from simulation import ROOT, reverts


@pytest.mark.parametrize("revert", reverts.REVERTS, ids=lambda r: r.number)
def test_each_fix_the_table_names_is_found_once_and_undone(revert: reverts.Revert) -> None:
    assert reverts.reverted_text(revert) != (ROOT / revert.path).read_text()
