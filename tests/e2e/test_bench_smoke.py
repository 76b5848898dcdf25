"""`make bench-smoke`: one small round of the benchmark writes a well-formed report (no speed is checked)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def test_smoke_round_writes_a_well_formed_report(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "bench", "--smoke", "--out", str(tmp_path)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "hack")}, capture_output=True, text=True, timeout=900)
    # The bench itself refuses a malformed report (bench.report.check) with a non-zero exit.
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    single = report["single_node"]
    assert single["pods"] == 30 and len(single["rounds"]) == 1
    assert {"operator", "kubectl"} == set(report["api_cost"])
    # Both drains removed pods through the Eviction API, and each client's requests were counted apart.
    for who in ("operator", "kubectl"):
        assert any("pods/eviction" in key for key in report["api_cost"][who]["per_pod"]), report["api_cost"][who]
    assert {g["goal"] for g in report["goals"]} and "Goals" in (tmp_path / "report.txt").read_text()
