"""The shipped alerts are valid Prometheus rules and fire when, and only when, docs/metrics.md says: promtool,
built from Prometheus's pinned module, checks the PrometheusRule's groups and runs their unit tests."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import toolchain
from node_maintenance_packaging.monitoring import PROMETHEUS_RULE_FILE

pytestmark = pytest.mark.tools

ROOT = Path(__file__).resolve().parents[2]
TESTS = Path(__file__).resolve().parent / "alerts" / "node-maintenance.test.yaml"


def _groups() -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = yaml.safe_load((ROOT / PROMETHEUS_RULE_FILE).read_text())["spec"]["groups"]
    return groups


def _rules_file(directory: Path) -> Path:
    """The PrometheusRule's spec as the plain rules file promtool reads, under the name the unit tests load."""
    (name,) = yaml.safe_load(TESTS.read_text())["rule_files"]
    path = directory / str(name)
    path.write_text(yaml.safe_dump({"groups": _groups()}, sort_keys=False))
    return path


def _promtool(*arguments: str | Path) -> str:
    result = subprocess.run([str(toolchain.binary("promtool")), *map(str, arguments)], capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    return output


def test_promtool_checks_the_shipped_rules(tmp_path: Path) -> None:
    rules = sum(len(group["rules"]) for group in _groups())
    assert f"SUCCESS: {rules} rules found" in _promtool("check", "rules", _rules_file(tmp_path))


def test_each_alert_is_tested_firing_and_quiet() -> None:
    alerts = {rule["alert"] for group in _groups() for rule in group["rules"]}
    cases = [case for test in yaml.safe_load(TESTS.read_text())["tests"] for case in test["alert_rule_test"]]
    assert {case["alertname"] for case in cases if case["exp_alerts"]} == alerts
    assert {case["alertname"] for case in cases if not case["exp_alerts"]} == alerts


def test_each_alert_fires_and_stays_quiet_as_its_unit_tests_expect(tmp_path: Path) -> None:
    _rules_file(tmp_path)
    shutil.copy(TESTS, tmp_path)
    _promtool("test", "rules", tmp_path / TESTS.name)
