"""Every release as releases.yaml declares it, for tests that install them one by one."""

from __future__ import annotations

from pathlib import Path

from node_maintenance_packaging.render import RELEASES_FILE, load_inputs

_RELEASES = load_inputs(Path(__file__).resolve().parents[1] / RELEASES_FILE).releases.releases
RELEASES = [release.version for release in _RELEASES]  # oldest first
HEAD = RELEASES[-1]
NEWEST = _RELEASES[-1]  # the head as declared: its edges, its skipRange, its createdAt
NEXT = str(NEWEST.semver.bump_minor())  # a release not declared yet, for tests that append one
SERVED = {release.version: sorted(release.served) for release in _RELEASES}  # API versions each release's CRD serves
CRDS = {release.version: [crd.resource.crd_name for crd in release.crds] for release in _RELEASES}  # the CRDs each release owns
ALL_CRDS = sorted({name for names in CRDS.values() for name in names})
