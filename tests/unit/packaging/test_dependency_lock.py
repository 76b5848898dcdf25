"""The operator image's dependencies are those of hack/operator-image.lock, which hack/install-app.sh installs by hash
from the wheels it downloaded (no index), and its wheel is built by the backend of hack/build-backend.lock, installed
by hash too: each lock must pin, with hashes, a version each of pyproject.toml's requirements (its dependencies, its
build-system) accepts, or the image would not be what pyproject.toml says (`make lock` writes both again)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.unit.rendering import ROOT

PINNED = re.compile(r"^([A-Za-z0-9._-]+)==([^ ;\\]+)")
PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _pins(lock: Path) -> dict[str, tuple[str, int]]:
    """Each locked package: its version and how many hashes pin it."""
    pins: dict[str, tuple[str, int]] = {}
    current = ""
    for line in lock.read_text().splitlines():
        found = PINNED.match(line)
        if found:
            current = canonicalize_name(found[1])
            pins[current] = (found[2], 0)
        elif line.strip().startswith("--hash=sha256:") and current:
            version, hashes = pins[current]
            pins[current] = (version, hashes + 1)
    return pins


@pytest.mark.parametrize(("lock", "requirements"), [
    ("operator-image.lock", PYPROJECT["project"]["dependencies"]),
    ("build-backend.lock", PYPROJECT["build-system"]["requires"]),
])
def test_every_requirement_is_locked_at_a_version_it_accepts_with_its_hashes(lock: str, requirements: list[str]) -> None:
    pins = _pins(ROOT / "hack" / lock)
    for requirement in (Requirement(text) for text in requirements):
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not in {lock}; run `make lock`"
        assert requirement.specifier.contains(pins[name][0], prereleases=True), f"{requirement} does not accept the locked {pins[name][0]}; run `make lock`"
    assert all(hashes for _, hashes in pins.values()), [name for name, (_, hashes) in pins.items() if not hashes]


def test_the_recipe_installs_the_lock_by_hash_from_what_it_downloaded() -> None:
    recipe = (ROOT / "hack" / "install-app.sh").read_text()
    download = next(line for line in recipe.splitlines() if " pip download " in line)
    install = recipe[recipe.index(" pip install --quiet --no-index "):]
    assert "--require-hashes" in download and "-r hack/operator-image.lock" in download
    assert all(option in install for option in ("--no-index", "--require-hashes", "-r hack/operator-image.lock"))
    assert "hack/operator-image.lock" in (ROOT / "Dockerfile").read_text()


def test_the_recipe_builds_the_wheel_with_the_locked_backend_only() -> None:
    """Without --no-build-isolation pip would fetch the newest setuptools the index offers, whose version the image
    records: the image would change with the index."""
    recipe = " ".join((ROOT / "hack" / "install-app.sh").read_text().replace("\\\n", " ").split())
    backend = recipe[recipe.index(" pip install "):recipe.index("-r hack/build-backend.lock")]
    assert "--require-hashes" in backend and '--target "$work/backend"' in backend
    wheel = recipe[recipe.index(" pip wheel "):]
    assert "--no-build-isolation" in wheel.split(")")[0] and 'PYTHONPATH="$work/backend"' in recipe
    assert "hack/build-backend.lock" in (ROOT / "Dockerfile").read_text()
    assert "!hack/build-backend.lock" in (ROOT / ".dockerignore").read_text().splitlines()  # in an engine's build context
