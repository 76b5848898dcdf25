"""Maintenance windows at a given moment: open or not, when the open one closes, when the next opens; across
midnight, daylight-saving changes and overlapping windows; and windows that cannot be read."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from node_maintenance.policy import windows

UTC = datetime.UTC


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime.datetime:
    return datetime.datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def window_state(specs: list[dict[str, Any]], now: datetime.datetime) -> windows.WindowState:
    parsed, invalid = windows.parse(specs)
    assert not invalid
    return windows.state_at(parsed, now)


@pytest.mark.parametrize(("text", "seconds"), [("90m", 5400), ("48h", 172800), ("1h30m", 5400), ("1.5h", 5400), ("40s", 40), ("500ms", 0.5)])
def test_go_durations(text: str, seconds: float) -> None:
    assert windows.parse_duration(text) == datetime.timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "90", "1d", "h", "1h 30m", "-1h"])
def test_what_is_not_a_go_duration(text: str) -> None:
    with pytest.raises(ValueError):
        windows.parse_duration(text)


def test_a_window_across_midnight_is_open_on_both_sides_and_closes_the_next_day() -> None:
    nightly = [{"schedule": "0 22 * * *", "duration": "4h"}]
    assert window_state(nightly, utc(2026, 1, 1, 21, 59)) == windows.WindowState(False, next_opens=utc(2026, 1, 1, 22))
    assert window_state(nightly, utc(2026, 1, 1, 22)) == windows.WindowState(True, utc(2026, 1, 2, 2), utc(2026, 1, 2, 22))
    assert window_state(nightly, utc(2026, 1, 2, 1, 59, 59)).open
    assert window_state(nightly, utc(2026, 1, 2, 2)) == windows.WindowState(False, next_opens=utc(2026, 1, 2, 22))  # the end is not in it


def test_the_schedule_is_read_in_its_time_zone() -> None:
    berlin = [{"schedule": "0 22 * * *", "duration": "1h", "timeZone": "Europe/Berlin"}]
    assert window_state(berlin, utc(2026, 1, 1, 12)).next_opens == utc(2026, 1, 1, 21)  # CET: UTC+1
    assert window_state(berlin, utc(2026, 7, 1, 12)).next_opens == utc(2026, 7, 1, 20)  # CEST: UTC+2


def test_a_window_in_the_hour_spring_forward_skips_opens_right_after_the_jump() -> None:
    # 29 March 2026, Europe/Berlin: 02:00 CET jumps to 03:00 CEST, so 02:30 never happens that day.
    early = [{"schedule": "30 2 * * *", "duration": "1h", "timeZone": "Europe/Berlin"}]
    assert window_state(early, utc(2026, 3, 28, 23)).next_opens == utc(2026, 3, 29, 1)  # 03:00 CEST, the first minute after the jump
    assert window_state(early, utc(2026, 3, 29, 1, 30)) == windows.WindowState(True, utc(2026, 3, 29, 2), utc(2026, 3, 30, 0, 30))
    assert window_state(early, utc(2026, 3, 29, 2)).next_opens == utc(2026, 3, 30, 0, 30)  # 02:30 CEST the day after


def test_a_window_across_the_fall_back_hour_lasts_its_duration_on_the_wall_clock() -> None:
    # 25 October 2026, Europe/Berlin: 03:00 CEST falls back to 02:00 CET, so the night has 25 hours.
    night = [{"schedule": "0 1 * * *", "duration": "3h", "timeZone": "Europe/Berlin"}]
    opened = utc(2026, 10, 24, 23)  # 01:00 CEST
    assert window_state(night, opened) == windows.WindowState(True, utc(2026, 10, 25, 3), utc(2026, 10, 26, 0))  # 04:00 CET, as read
    assert window_state(night, utc(2026, 10, 25, 1, 30)).open  # 02:30 CET, the second 02:30 of the night
    # A window opening in the repeated hour opens once, at its first occurrence.
    repeated = [{"schedule": "30 2 * * *", "duration": "30m", "timeZone": "Europe/Berlin"}]
    assert window_state(repeated, utc(2026, 10, 24, 12)).next_opens == utc(2026, 10, 25, 0, 30)  # 02:30 CEST
    # At 02:30 CET it is still the window opened at 02:30 CEST, open until the wall clock reads 03:00 (CET): it does not
    # open a second time.
    assert window_state(repeated, utc(2026, 10, 25, 1, 30)) == windows.WindowState(True, utc(2026, 10, 25, 2), utc(2026, 10, 26, 1, 30))


def test_a_window_opened_in_the_second_pass_of_the_repeated_hour_closes_after_it_opened() -> None:
    # 25 October 2026, Europe/Berlin: 02:00 to 03:00 comes twice; every 20 minutes for 10 minutes fires in both passes.
    often = [{"schedule": "*/20 * * * *", "duration": "10m", "timeZone": "Europe/Berlin"}]
    assert window_state(often, utc(2026, 10, 25, 1, 5)) == windows.WindowState(True, utc(2026, 10, 25, 1, 10), utc(2026, 10, 25, 1, 20))  # 02:05 CET
    assert window_state(often, utc(2026, 10, 25, 1, 15)) == windows.WindowState(False, next_opens=utc(2026, 10, 25, 1, 20))


@pytest.mark.parametrize(("friday", "closes"), [
    (utc(2026, 3, 27, 21), utc(2026, 3, 30, 4)),  # spring: Friday 22:00 CET, Monday 06:00 CEST (55 h later)
    (utc(2026, 10, 23, 20), utc(2026, 10, 26, 5)),  # autumn: Friday 22:00 CEST, Monday 06:00 CET (57 h later)
    (utc(2026, 1, 16, 21), utc(2026, 1, 19, 5)),  # no change between: 56 h
], ids=["spring", "autumn", "winter"])
def test_a_weekend_window_closes_on_monday_at_06_00_whatever_daylight_saving_change_falls_in_it(
        friday: datetime.datetime, closes: datetime.datetime) -> None:
    """The policy guide's "Friday 22:00 + 56h, until Monday 06:00": the duration is read on the wall clock."""
    weekend = [{"schedule": "0 22 * * 5", "duration": "56h", "timeZone": "Europe/Berlin"}]
    assert window_state(weekend, friday).closes == closes


def test_a_window_whose_close_the_spring_change_skips_closes_at_the_jump() -> None:
    # 29 March 2026, Europe/Berlin: 02:00 CET jumps to 03:00 CEST; a window from 23:30 for 3 h would close at 02:30.
    late = [{"schedule": "30 23 * * 6", "duration": "3h", "timeZone": "Europe/Berlin"}]
    assert window_state(late, utc(2026, 3, 28, 22, 30)).closes == utc(2026, 3, 29, 1)  # 03:00 CEST, the first time after the jump


def test_overlapping_windows_are_open_until_the_latest_end_of_the_chain() -> None:
    chained = [{"schedule": "0 22 * * *", "duration": "2h"}, {"schedule": "0 23 * * *", "duration": "2h"},
               {"schedule": "0 1 * * *", "duration": "30m"}, {"schedule": "0 12 * * *", "duration": "1h"}]
    # 22:00-00:00 overlaps 23:00-01:00, which touches 01:00-01:30: one window from 22:00 to 01:30.
    assert window_state(chained, utc(2026, 1, 1, 22, 30)) == windows.WindowState(True, utc(2026, 1, 2, 1, 30), utc(2026, 1, 2, 12))
    assert window_state(chained, utc(2026, 1, 2, 0, 30)).closes == utc(2026, 1, 2, 1, 30)
    assert window_state(chained, utc(2026, 1, 2, 1, 30)) == windows.WindowState(False, next_opens=utc(2026, 1, 2, 12))


def test_the_next_opening_is_the_soonest_of_every_window() -> None:
    weekly = [{"schedule": "0 22 * * 5", "duration": "8h"}, {"schedule": "0 6 1 * *", "duration": "1h"}]
    # Thursday 1 January 2026: the monthly one at 06:00 comes before Friday's.
    assert window_state(weekly, utc(2026, 1, 1)).next_opens == utc(2026, 1, 1, 6)
    assert window_state(weekly, utc(2026, 1, 1, 7)).next_opens == utc(2026, 1, 2, 22)
    assert window_state(weekly, utc(2026, 1, 1, 7)).boundary == utc(2026, 1, 2, 22)


def test_a_window_that_never_closes_is_followed_only_so_far() -> None:
    always = [{"schedule": "* * * * *", "duration": "2m"}]
    now = utc(2026, 1, 1)
    # Its end is looked for again once that time comes (the policies decide again at every boundary).
    assert window_state(always, now) == windows.WindowState(True, now + datetime.timedelta(minutes=windows.CHAIN_LOOKAHEAD + 2),
                                                            now + datetime.timedelta(minutes=windows.CHAIN_LOOKAHEAD + 3))


@pytest.mark.parametrize(("specs", "moments"), [
    ([{"schedule": "0 22 * * *", "duration": "4h"}], 400),
    ([{"schedule": "0 22 * * 5", "duration": "56h", "timeZone": "Europe/Berlin"},
      {"schedule": "30 2 * * *", "duration": "1h", "timeZone": "Europe/Berlin"}], 400),
    ([{"schedule": "0 22 * * *", "duration": "2h"}, {"schedule": "0 23 * * *", "duration": "2h"}, {"schedule": "0 1 * * *", "duration": "30m"}], 400),
    # A chain followed only so far: its end moves on as time does (each moment walks CHAIN_LOOKAHEAD openings).
    ([{"schedule": "*/7 * * * *", "duration": "10m"}], 40),
], ids=["nightly", "weekend-across-the-autumn-change", "chained", "never-closing"])
def test_a_state_kept_from_an_earlier_moment_is_the_one_worked_out_afresh(specs: list[dict[str, Any]], moments: int) -> None:
    """A later moment before the state's boundary is answered from the state last found; asked from the latest moment
    back to the earliest, every answer is worked out again (each moment comes before the last). Both orders agree,
    over three days with openings, closes, a daylight-saving change, and clocks set back."""
    start, span = utc(2026, 10, 23, 20), datetime.timedelta(hours=75)
    asked = [start + span * index / moments for index in range(moments)]
    forward = [window_state(specs, moment) for moment in asked]
    backward = [window_state(specs, moment) for moment in reversed(asked)]
    assert forward == backward[::-1]
    assert len(set(forward)) >= 2, "the moments meet a boundary of the windows"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"schedule": "0 22 * * *", "duration": "1h", "timeZone": "Mars/Olympus"},
         'spec.windows[1].timeZone: "Mars/Olympus" is not an IANA time zone; use a name such as "Europe/Berlin"'),
        ({"schedule": "0 25 * * *", "duration": "1h"}, 'spec.windows[1].schedule: "0 25 * * *" is not a cron schedule that fires; use five fields'),
        ({"schedule": "0 0 30 2 *", "duration": "1h"}, 'spec.windows[1].schedule: "0 0 30 2 *" is not a cron schedule that fires'),
        ({"schedule": "0 0 * * * *", "duration": "1h"}, 'spec.windows[1].schedule: "0 0 * * * *" is not a cron schedule that fires'),
        ({"schedule": "0 22 * * *", "duration": "1 day"},
         'spec.windows[1].duration: "1 day" is not a positive Go duration; use one such as "90m", "8h" or "1h30m"'),
        ({"schedule": "0 22 * * *", "duration": "0s"}, 'spec.windows[1].duration: "0s" is not a positive Go duration'),
    ],
)
def test_a_window_that_cannot_be_read_is_named_with_its_field_and_fix(spec: dict[str, Any], message: str) -> None:
    parsed, invalid = windows.parse([{"schedule": "0 1 * * *", "duration": "1h"}, spec])
    assert len(parsed) == 1 and len(invalid) == 1 and invalid[0].startswith(message), invalid
