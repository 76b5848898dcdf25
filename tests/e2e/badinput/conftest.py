"""Bad input at every entry point an outsider reaches: each test counts what it tried, per category,
and the counts are printed at the end of the run."""

from __future__ import annotations

from collections import Counter

import pytest

TRIED: Counter[str] = Counter()


@pytest.fixture
def tally() -> Counter[str]:
    """Count one bad input: ``tally["category"] += 1``."""
    return TRIED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TRIED:
        terminalreporter.write_sep("-", "bad inputs tried")
        for category, count in sorted(TRIED.items()):
            terminalreporter.write_line(f"{count:6d}  {category}")
