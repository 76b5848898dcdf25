"""The harness's one polling loop: quick first polls, a slower steady pace, and a deadline kept to the poll."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest

from devcluster import waiting


class Clock:
    """Monotonic time that moves only when the loop sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(time, "monotonic", lambda: fake.now)
    monkeypatch.setattr(time, "sleep", fake.sleep)
    return fake


def test_pauses_start_quick_and_settle_at_once_a_second() -> None:
    assert list(itertools.islice(waiting.pauses(), 6)) == pytest.approx([0.2, 0.3, 0.45, 0.675, 1.0, 1.0])


def test_the_last_poll_happens_at_the_deadline_never_after(clock: Clock) -> None:
    polled_at = [clock.now for _ in waiting.polls(2.5, itertools.repeat(1.0))]
    assert polled_at == [0.0, 1.0, 2.0, 2.5]


def test_a_wait_without_time_still_looks_once(clock: Clock) -> None:
    assert waiting.wait_for("something", lambda: "here", timeout=0) == "here"


def test_a_wait_that_never_holds_names_what_it_waited_for(clock: Clock) -> None:
    with pytest.raises(waiting.ClusterError, match=r"timed out after 3s waiting for the CRD.*\nits log"):
        waiting.wait_for("the CRD", lambda: None, timeout=3, details=lambda: "its log")
    assert clock.now == pytest.approx(3.0)


def test_a_check_that_raises_a_retried_error_is_polled_again_and_its_last_failure_named(clock: Clock) -> None:
    answers = iter([ConnectionResetError("reset by peer"), None, ConnectionRefusedError("refused")])

    def check() -> None:
        answer = next(answers, ConnectionRefusedError("refused"))
        if answer is not None:
            raise answer

    with pytest.raises(waiting.ClusterError, match=r"waiting for the API; the last check failed: ConnectionRefusedError\('refused'\)"):
        waiting.wait_for("the API", check, timeout=3, retrying=(OSError,))


def test_a_retried_error_that_clears_lets_the_wait_succeed(clock: Clock) -> None:
    answers: Iterator[OSError | str] = iter([OSError("away"), OSError("away"), "ready"])

    def check() -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert waiting.wait_for("the API", check, timeout=3, retrying=(OSError,)) == "ready"


def test_an_error_not_retried_ends_the_wait_at_once(clock: Clock) -> None:
    def check() -> None:
        raise KeyError("status")

    with pytest.raises(KeyError):
        waiting.wait_for("the API", check, timeout=3, retrying=(OSError,))
    assert clock.now == 0
