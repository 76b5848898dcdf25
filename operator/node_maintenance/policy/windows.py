"""A NodeMaintenancePolicy's maintenance windows, as pure functions of ``now``: whether one is open, when the open
one closes, when the next opens.

A window opens each time its cron schedule fires (``cronsim``, in its IANA time zone, with cronsim's DST rules: a
time skipped by spring-forward fires at the first minute after the jump, a time repeated by fall-back fires once)
and stays open for its duration on the wall clock of that time zone, as an admin reads it: "Friday 22:00 + 56h" closes
Monday 06:00 whatever daylight-saving change falls between (``3h`` from 01:00 on a fall-back night closes at 04:00,
4 hours later). A close time the spring change skips closes at the jump, the first time after it; one the autumn
change repeats closes at its first occurrence after the opening. Windows that overlap or touch are one: open until the last of them ends.
"""

from __future__ import annotations

import datetime
import heapq
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

DEFAULT_TIME_ZONE = "UTC"
# A chain of overlapping windows is followed this many openings ahead at most (a window that never closes, such as
# every minute for two minutes, would be followed forever); its end is then looked for again once that time comes.
CHAIN_LOOKAHEAD = 200

# Go's time.ParseDuration units (the schema's CEL rule accepts the same), in seconds.
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")


class Invalid(ValueError):
    """A window field that cannot be read; its message names the field and says how to fix it."""


def parse_duration(text: str) -> datetime.timedelta:
    """A Go duration (``90m``, ``1h30m``, ``1.5h``) as a timedelta; raises ValueError for anything else.

    A dozen lines rather than a dependency: the grammar is the schema's own, and the one maintained Python
    parser (durationpy) comes only as a dependency of the official client, which the operator may drop."""
    position, seconds = 0, 0.0
    while position < len(text):
        part = _PART.match(text, position)
        if part is None:
            raise ValueError(text)
        seconds += float(part.group(1)) * _UNITS[part.group(2)]
        position = part.end()
    if not text:
        raise ValueError(text)
    return datetime.timedelta(seconds=seconds)


@dataclass(frozen=True)
class Window:
    """One entry of spec.windows, parsed."""

    schedule: str
    duration: datetime.timedelta
    zone: ZoneInfo

    @classmethod
    def of(cls, spec: Mapping[str, Any], index: int) -> Window:
        """Raises Invalid naming the first field of ``spec.windows[index]`` that cannot be read."""
        where = f"spec.windows[{index}]"
        zone_name = spec.get("timeZone") or DEFAULT_TIME_ZONE
        try:
            zone = ZoneInfo(str(zone_name))
        except (ZoneInfoNotFoundError, ValueError):
            raise Invalid(f'{where}.timeZone: "{zone_name}" is not an IANA time zone; use a name such as "Europe/Berlin"') from None
        schedule = str(spec.get("schedule") or "")
        try:
            if len(schedule.split()) != 5:
                raise CronSimError("five fields")
            next(CronSim(schedule, datetime.datetime(2000, 1, 1, tzinfo=zone)))  # refuses one that never fires (30 February)
        except (CronSimError, StopIteration):
            raise Invalid(f'{where}.schedule: "{schedule}" is not a cron schedule that fires; use five fields '
                          '(minute hour day-of-month month day-of-week), such as "0 22 * * 5" for Fridays at 22:00') from None
        text = str(spec.get("duration") or "")
        try:
            duration = parse_duration(text)
        except ValueError:
            duration = datetime.timedelta(0)
        if duration <= datetime.timedelta(0):
            raise Invalid(f'{where}.duration: "{text}" is not a positive Go duration; use one such as "90m", "8h" or "1h30m"')
        return cls(schedule, duration, zone)

    def last_opened(self, now: datetime.datetime) -> datetime.datetime:
        """When it last opened at or before ``now`` (UTC). Occurrences fall on whole minutes, so the second after
        ``now``'s whole second bounds them (cronsim iterates strictly before its start)."""
        start = (now.replace(microsecond=0) + datetime.timedelta(seconds=1)).astimezone(self.zone)
        return next(CronSim(self.schedule, start, reverse=True)).astimezone(datetime.UTC)

    def closes(self, opened: datetime.datetime) -> datetime.datetime:
        """When it closes, having opened at ``opened``: its duration added to the wall clock of its time zone (UTC)."""
        return _instant(self.zone, opened.astimezone(self.zone).replace(tzinfo=None) + self.duration, opened)

    def openings_after(self, instant: datetime.datetime) -> Iterable[datetime.datetime]:
        """When it opens, strictly after ``instant``, in UTC."""
        for opened in CronSim(self.schedule, instant.astimezone(self.zone)):
            yield opened.astimezone(datetime.UTC)


def _instant(zone: ZoneInfo, wall: datetime.datetime, opened: datetime.datetime) -> datetime.datetime:
    """The first instant (UTC) after ``opened`` at which the wall clock of ``zone`` reads ``wall`` (naive): of the two the
    autumn change makes of it, the first after the opening (a window opened in the repeated hour's second pass closes
    in it too); when the spring change skips it, the instant of the jump (found by halving the span the two readings
    of a skipped time leave, down to the microsecond)."""
    readings = [wall.replace(tzinfo=zone, fold=fold).astimezone(datetime.UTC) for fold in (0, 1)]
    existing = sorted(t for t in readings if t.astimezone(zone).replace(tzinfo=None) == wall)
    if existing:
        return next((t for t in existing if t > opened), existing[-1])
    before, after = readings[1], readings[0]  # the jump lies in (before, after]
    offset = before.astimezone(zone).utcoffset()
    while after - before > datetime.timedelta(microseconds=1):
        middle = before + (after - before) / 2
        before, after = (middle, after) if middle.astimezone(zone).utcoffset() == offset else (before, middle)
    return after


def parse(specs: Sequence[Mapping[str, Any]]) -> tuple[tuple[Window, ...], tuple[str, ...]]:
    """The windows of spec.windows, and why each one that cannot be read is refused."""
    windows: list[Window] = []
    invalid: list[str] = []
    for index, spec in enumerate(specs):
        try:
            windows.append(Window.of(spec, index))
        except Invalid as error:
            invalid.append(str(error))
    return tuple(windows), tuple(invalid)


@dataclass(frozen=True)
class WindowState:
    """The windows at one moment: open or not, when the open one closes, when the next opens (None: never)."""

    open: bool
    closes: datetime.datetime | None = None
    next_opens: datetime.datetime | None = None

    @property
    def boundary(self) -> datetime.datetime | None:
        """The next moment this changes: the open window's end, or the next opening."""
        return self.closes if self.open else self.next_opens


def state_at(windows: Sequence[Window], now: datetime.datetime) -> WindowState:
    """Where ``windows`` stand at ``now`` (aware). The open one's end follows, in order, every window opening before
    the end found so far.

    A state found at one moment holds unchanged until its boundary: nothing opens before the next opening, and every
    window that opens before the open one's end was followed to find that end. So each set of windows keeps the last
    state found, and a later moment before its boundary is answered from it without walking the cron schedules again:
    every decision of a pool reads its windows, and a fleet's decisions come many times a second. A moment before the one
    the state was found at (a clock set back), or at or after its boundary, is worked out again; so is every moment of a
    chain cut short at CHAIN_LOOKAHEAD, whose end moves on as time does."""
    key = tuple(windows)
    known = _known.get(key)
    if known is not None and known[0] <= now and (known[1].boundary is None or now < known[1].boundary):
        return known[1]
    state, lasting = _worked_out(key, now)
    if lasting:
        if len(_known) >= _KNOWN_LIMIT:
            _known.clear()
        _known[key] = (now, state)
    return state


# The last state found for each set of windows, with the moment it was found at (see state_at). A cluster has few sets
# of windows; a bound keeps edits to them over months from piling up.
_known: dict[tuple[Window, ...], tuple[datetime.datetime, WindowState]] = {}
_KNOWN_LIMIT = 256


def _worked_out(windows: tuple[Window, ...], now: datetime.datetime) -> tuple[WindowState, bool]:
    """The state at ``now``, and whether it holds until its boundary (not when the chain was cut short)."""
    ends = [end for w in windows if (end := w.closes(w.last_opened(now))) > now]
    if not ends:
        return WindowState(open=False, next_opens=_next_opening(windows, now)), True
    closes, followed = max(ends), False
    merged = heapq.merge(*(_spans(w, now) for w in windows))
    for opened, ends_at in itertools.islice(merged, CHAIN_LOOKAHEAD):
        if opened > closes:
            followed = True
            break
        closes = max(closes, ends_at)
    return WindowState(open=True, closes=closes, next_opens=_next_opening(windows, closes)), followed


def _spans(window: Window, after: datetime.datetime) -> Iterable[tuple[datetime.datetime, datetime.datetime]]:
    """Each opening after ``after`` with its close."""
    return ((opened, window.closes(opened)) for opened in window.openings_after(after))


def _next_opening(windows: Sequence[Window], after: datetime.datetime) -> datetime.datetime | None:
    return min((next(iter(w.openings_after(after))) for w in windows), default=None)
