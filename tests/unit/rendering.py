"""The repository's committed inputs and outputs, and nmo-pack runs over them, for the tests that render
bundles, catalogs and docs or read releases.yaml."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from node_maintenance_packaging import cli

ROOT = Path(__file__).resolve().parents[2]


def load_yaml(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def render_bundle(tmp_path: Path, version: str) -> Path:
    """The bundle of one release of the committed releases.yaml, rendered under ``tmp_path``."""
    out = tmp_path / version
    assert cli.main(["bundle", "--root", str(ROOT), "--release", version, "--out", str(out)]) == 0
    return out


def render_edited(tmp_path: Path, edit: Callable[[str], str], capsys: pytest.CaptureFixture[str], command: str = "all") -> tuple[int, str]:
    """Render from an edited copy of releases.yaml; returns the exit code and stderr."""
    text = (ROOT / "releases.yaml").read_text()
    edited = edit(text)
    assert edited != text, "the edit did not apply"
    (tmp_path / "releases.yaml").write_text(edited)
    capsys.readouterr()
    code = cli.main([command, "--root", str(tmp_path)])
    return code, capsys.readouterr().err


def append_release(text: str, release: str) -> str:
    return text.rstrip("\n") + "\n\n" + release
