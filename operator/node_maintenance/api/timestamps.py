"""The API's two timestamp formats, written and read in one place.

``Time`` (metadata, conditions, our status) has whole seconds; ``MicroTime`` (a Lease's renewTime and
acquireTime) has microseconds. Both are UTC with a ``Z``.
"""

from __future__ import annotations

import datetime


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


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
