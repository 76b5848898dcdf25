"""A status someone else wrote is told apart from the operator's own writes, even those kopf has not shown yet; a write
whose answer never came is known to have been applied once the object shows it."""

from __future__ import annotations

from node_maintenance.drain.bookkeeping import applied, foreign_status

OURS = {"phase": "Running", "drainProgress": 50, "pendingPods": ["a"], "lastError": "", "lastUpdate": "2026-01-01T00:00:00Z"}
NEWER = {**OURS, "drainProgress": 100, "pendingPods": [], "phase": "Succeeded", "lastUpdate": "2026-01-01T00:00:09Z"}


def test_our_own_writes_are_not_foreign_whichever_kopf_shows() -> None:
    assert not foreign_status(OURS, [OURS, NEWER], "v1beta1")
    assert not foreign_status(NEWER, [OURS, NEWER], "v1beta1")
    assert not foreign_status({**NEWER, "lastUpdate": "2026-02-02T00:00:00Z"}, [NEWER], "v1beta1")  # a newer stamp only


def test_a_field_we_write_with_a_value_we_never_wrote_is_foreign() -> None:
    assert foreign_status({**NEWER, "phase": "Failed"}, [OURS, NEWER], "v1beta1")
    assert foreign_status({**NEWER, "pendingPods": ["x"]}, [NEWER], "v1beta1")
    assert foreign_status({}, [NEWER], "v1beta1")  # the whole status removed


def test_fields_we_never_write_and_nothing_written_yet_are_not_our_concern() -> None:
    assert not foreign_status({**NEWER, "unknownField": 1}, [NEWER], "v1beta1")
    assert not foreign_status({"phase": "Succeeded"}, [], "v1beta1")


def test_only_fields_the_working_version_holds_are_compared() -> None:
    # v1alpha1 holds no drainStartTime: what it cannot show is not missing.
    ours = {**NEWER, "drainStartTime": "2026-01-01T00:00:00Z"}
    assert not foreign_status(NEWER, [ours], "v1alpha1")
    assert foreign_status(NEWER, [ours], "v1beta1")


def test_a_write_whose_answer_never_came_is_applied_once_the_object_shows_it() -> None:
    assert applied({**NEWER, "lastUpdate": "2026-01-01T00:00:10Z"}, [OURS, NEWER], "v1beta1") == 1  # the newest shown
    assert applied(OURS, [OURS, NEWER], "v1beta1") == 0
    assert applied({**NEWER, "phase": "Failed"}, [OURS, NEWER], "v1beta1") is None  # not what was sent: not applied
    assert applied(NEWER, [], "v1beta1") is None
