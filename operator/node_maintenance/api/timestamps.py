"""The API's two timestamp formats, written and read in one place.

``Time`` (metadata, conditions, our status) has whole seconds; ``MicroTime`` (a Lease's renewTime and
acquireTime) has microseconds. Both are UTC with a ``Z``.

The wall clock is read here too, and only here: :func:`now`. The deterministic simulation runs the operator on a
clock of its own (which it may jump forward and back) by setting it with :func:`use_clock`; the monotonic clock
the runtime reads is its event loop's, which the simulation's loop keeps.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable


def _system() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


_clock: Callable[[], datetime.datetime] = _system


def now() -> datetime.datetime:
    """The wall clock, as every part of the operator reads it."""
    return _clock()


def use_clock(clock: Callable[[], datetime.datetime] | None) -> None:
    """Read the wall clock from ``clock`` from now on (None: the system's again)."""
    global _clock
    _clock = clock or _system


def rfc3339(moment: datetime.datetime) -> str:
    """A ``Time``: seconds, UTC."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(moment: datetime.datetime) -> str:
    """A ``MicroTime``: microseconds, UTC."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse(text: str) -> datetime.datetime:
    """A ``Time`` or a ``MicroTime`` as the API writes it (any fraction of a second, ``Z`` or an offset)."""
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)
