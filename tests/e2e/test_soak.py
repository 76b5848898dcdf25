"""`make soak` for one minute: the random loop with kills and network faults runs end to end on its own
cluster, finds no violation, and writes a report with every figure the long soak reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from soak.chaos import kills_asked

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def test_one_minute_soak(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "soak", "--minutes", "1", "--out", str(tmp_path)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "hack")}, capture_output=True, text=True, timeout=600)
    report = json.loads((tmp_path / "report.json").read_text())
    print((tmp_path / "report.txt").read_text())
    # The soak exits non-zero on a violation, an unfinished maintenance or memory growth past its bar.
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert report["violations"] == []
    assert report["operations"]["create"] >= 10 and report["operations"]["delete"] >= 3, report["operations"]
    assert report["faults"].get("operator SIGKILL", 0) >= kills_asked(60), report["faults"]
    assert sum(v for k, v in report["faults"].items() if k.startswith("network")) >= 3, report["faults"]
    assert report["invariant_checks"] >= 20 and report["budget_samples"] >= 100
    assert report["memory"]["start_mib"] > 0 and report["memory"]["one_process"]
