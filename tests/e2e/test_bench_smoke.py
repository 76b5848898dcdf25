"""`make bench-smoke`: one small round of the benchmark writes a well-formed report (no speed is checked), with
the timeline of one drain and a small fleet, whose policy is never exceeded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def smoke_round(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One smoke round for every test here: what it printed and where it wrote its report."""
    out = tmp_path_factory.mktemp("bench-smoke")
    result = subprocess.run([sys.executable, "-m", "bench", "--smoke", "--out", str(out)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "hack")}, capture_output=True, text=True, timeout=900)
    return result, out


@pytest.fixture(scope="module")
def smoke_report(smoke_round: tuple[subprocess.CompletedProcess[str], Path]) -> dict[str, Any]:
    result, out = smoke_round
    # The bench itself refuses a malformed report (bench.report.check) with a non-zero exit.
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    return report


def test_smoke_round_writes_a_well_formed_report(smoke_round: tuple[subprocess.CompletedProcess[str], Path],
                                                 smoke_report: dict[str, Any]) -> None:
    report, out = smoke_report, smoke_round[1]
    single = report["single_node"]
    assert single["pods"] == 30 and len(single["rounds"]) == 1
    assert {"operator", "kubectl"} == set(report["api_cost"])
    # Both drains removed pods through the Eviction API, and each client's requests were counted apart.
    for who in ("operator", "kubectl"):
        assert any("pods/eviction" in key for key in report["api_cost"][who]["per_pod"]), report["api_cost"][who]
    assert {g["goal"] for g in report["goals"]} and "Goals" in (out / "report.txt").read_text()


def test_smoke_fleet_never_cordons_more_than_its_policy_allows(smoke_report: dict[str, Any]) -> None:
    fleet = smoke_report["fleet"]
    assert (fleet["nodes"], fleet["max_parallel"], fleet["first"]) == (200, 10, 25) and fleet["drained"] >= 25, fleet
    cordoned = fleet["cordoned"]
    # A watch of the fleet's nodes counted the cordoned ones at every change: it saw each drained node cordoned,
    # so the highest count is not taken from no data.
    assert cordoned["events"] >= cordoned["cordons"] >= fleet["drained"], cordoned
    assert 1 <= cordoned["most"] <= 10, cordoned


def test_smoke_fleet_keeps_each_wait_in_line_within_three_requests(smoke_report: dict[str, Any]) -> None:
    # Waiting in line costs each maintenance at most 3 requests (its finalizer, its status when it joins the line, the
    # event saying it is queued), however long it waits and however often its place moves: the audit log counted them.
    waits = smoke_report["fleet"]["requests"]["whole_wait"]
    assert waits["taken"] >= 25 and waits["max"] <= 3, waits


def test_smoke_fleet_reports_what_the_policies_decisions_cost(smoke_report: dict[str, Any]) -> None:
    decisions = smoke_report["fleet"]["decisions"]
    # Read from the operator's /metrics: every NodeMaintenance created was a change heard, and a burst of changes is
    # decided once, so the fleet's one line was decided at most once per change.
    assert decisions["changes"] >= 200 and 1 <= decisions["lines_decided"] <= decisions["changes"], decisions
    assert decisions["cpu_seconds"] > 0 and decisions["cpu_ms_per_change"] is not None, decisions


def test_smoke_timeline_times_every_wave(smoke_report: dict[str, Any]) -> None:
    timeline = smoke_report["timeline"]
    # 30 pods: two Deployments of 10 under `maxUnavailable: 1` budgets, so nine releases of each budget between its
    # ten evictions, each matched to the disruption controller's update and to the operator's next eviction.
    assert timeline["releases"] >= 18 and timeline["unmatched"] == 0, timeline
    assert len(timeline["waves"]) >= 10 and all(w["sent_s"] is not None for w in timeline["waves"]), timeline["waves"]
