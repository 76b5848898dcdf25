"""The rendered catalog and every release's bundle pass the upstream validators OLM users run."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from devcluster import toolchain
from node_maintenance_packaging import releases
from node_maintenance_packaging.render import RELEASES_FILE, render_bundle

pytestmark = pytest.mark.tools

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = [r.version for r in releases.load(ROOT / RELEASES_FILE).releases]


def _run(*command: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=300)


def test_opm_validates_the_catalog() -> None:
    result = _run(toolchain.binary("opm"), "validate", ROOT / "catalog")
    assert result.returncode == 0, result.stdout + result.stderr


def test_operator_sdk_validates_the_committed_bundle_without_warnings() -> None:
    result = _run(toolchain.binary("operator-sdk"), "bundle", "validate", ROOT / "bundle", "--select-optional", "suite=operatorframework")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "level=warning" not in output and "level=error" not in output, output


@pytest.mark.parametrize("version", VERSIONS)
def test_operator_sdk_validates_every_release_bundle_without_warnings(version: str, tmp_path: Path) -> None:
    render_bundle(version, tmp_path, releases_file=ROOT / RELEASES_FILE)
    result = _run(
        toolchain.binary("operator-sdk"), "bundle", "validate", tmp_path / "bundle", "--select-optional", "suite=operatorframework"
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "level=warning" not in output and "level=error" not in output, output
