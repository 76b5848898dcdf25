"""An exception nobody foresaw, logged by the loop that meets it, is a violation; an API error is not."""

from __future__ import annotations

import logging

import pytest

from node_maintenance.client.errors import Unreachable
from simulation.raising import Raised


def decide() -> None:
    raise KeyError("zone=b")


@pytest.fixture
def raised() -> Raised:
    return Raised()


def test_an_unforeseen_exception_logged_with_its_traceback_is_a_violation_naming_where_it_was_raised(raised: Raised) -> None:
    log = logging.getLogger("an.engine")
    log.addHandler(raised)
    try:
        try:
            decide()
        except Exception:
            log.exception("maintenance step failed; retrying")
    finally:
        log.removeHandler(raised)
    (found,) = raised.taken()
    assert found.startswith("no step raises: maintenance step failed; retrying: KeyError: 'zone=b' (in decide, test_raising.py:")
    assert raised.taken() == []  # taken once


@pytest.mark.parametrize("logged", ["api error", "warning", "no traceback"])
def test_an_api_error_or_a_message_without_an_exception_is_none(raised: Raised, logged: str) -> None:
    log = logging.getLogger("an.engine")
    log.addHandler(raised)
    try:
        try:
            raise Unreachable("connection refused") if logged == "api error" else KeyError("x")
        except Exception:
            if logged == "warning":
                log.warning("failed", exc_info=True)
            else:
                log.error("failed", exc_info=logged == "api error")
    finally:
        log.removeHandler(raised)
    assert raised.taken() == []
