"""The operator image's dependencies are those of hack/operator-image.lock, which hack/install-app.sh installs by hash
from the wheels it downloaded (no index): the lock must pin, with hashes, a version each of pyproject.toml's
dependencies accepts, or the image would not be what pyproject.toml says (`make lock` writes it again)."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.unit.rendering import ROOT

LOCK = ROOT / "hack" / "operator-image.lock"
PINNED = re.compile(r"^([A-Za-z0-9._-]+)==([^ ;\\]+)")


def _pins() -> dict[str, tuple[str, int]]:
    """Each locked package: its version and how many hashes pin it."""
    pins: dict[str, tuple[str, int]] = {}
    current = ""
    for line in LOCK.read_text().splitlines():
        found = PINNED.match(line)
        if found:
            current = canonicalize_name(found[1])
            pins[current] = (found[2], 0)
        elif line.strip().startswith("--hash=sha256:") and current:
            version, hashes = pins[current]
            pins[current] = (version, hashes + 1)
    return pins


def test_every_dependency_is_locked_at_a_version_it_accepts_with_its_hashes() -> None:
    pins = _pins()
    dependencies = [Requirement(text) for text in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]
    for dependency in dependencies:
        name = canonicalize_name(dependency.name)
        assert name in pins, f"{dependency.name} is not in {LOCK.name}; run `make lock`"
        assert dependency.specifier.contains(pins[name][0], prereleases=True), f"{dependency} does not accept the locked {pins[name][0]}; run `make lock`"
    assert all(hashes for _, hashes in pins.values()), [name for name, (_, hashes) in pins.items() if not hashes]


def test_the_recipe_installs_the_lock_by_hash_from_what_it_downloaded() -> None:
    recipe = (ROOT / "hack" / "install-app.sh").read_text()
    download = next(line for line in recipe.splitlines() if " pip download " in line)
    install = recipe[recipe.index(" pip install "):]
    assert "--require-hashes" in download and "-r hack/operator-image.lock" in download
    assert all(option in install for option in ("--no-index", "--require-hashes", "-r hack/operator-image.lock"))
    assert "hack/operator-image.lock" in (ROOT / "Dockerfile").read_text()
