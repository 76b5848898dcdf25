"""The package version follows releases.yaml, the one place a release's version is written.

``nmo-pack images`` builds each release's wheel with ``NMO_VERSION`` naming that release; without it
the wheel takes the newest release.
"""

import os
from pathlib import Path

import yaml
from setuptools import setup


def _version() -> str:
    releases = yaml.safe_load((Path(__file__).parent / "releases.yaml").read_text(encoding="utf-8"))["releases"]
    known = [release["version"] for release in releases]
    wanted = os.environ.get("NMO_VERSION")
    if wanted:
        if wanted not in known:
            raise SystemExit(f"NMO_VERSION={wanted} is not a release in releases.yaml; use one of {', '.join(known)}")
        return wanted
    return max(known, key=lambda v: tuple(int(part) for part in v.split(".")))


setup(version=_version())
