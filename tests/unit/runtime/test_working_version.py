"""The operator works in the version the installed CRD serves: v1beta1 when it can, else v1alpha1
(an OLM upgrade may still have an older release's CRD in place)."""

from __future__ import annotations

from typing import Any

import pytest

from node_maintenance.runtime.storage import storage_version, working_version
from node_maintenance_packaging.crd import build_crd
from node_maintenance_packaging.releases import load
from node_maintenance_packaging.render import RELEASES_FILE
from tests.unit.rendering import ROOT

RELEASES = load(ROOT / RELEASES_FILE)


@pytest.mark.parametrize(
    ("release", "working", "storage"),
    [("0.1.0", "v1alpha1", "v1alpha1"), ("0.2.0", "v1alpha1", "v1alpha1"), ("0.3.0", "v1beta1", "v1beta1")],
)
def test_each_release_crd_gets_its_working_version(release: str, working: str, storage: str) -> None:
    crd = build_crd(RELEASES.get(release))
    assert working_version(crd) == working
    assert storage_version(crd) == storage


@pytest.mark.parametrize(
    ("versions", "working"),
    [
        ([{"name": "v1alpha1", "served": True, "storage": True}, {"name": "v1beta1", "served": False}], "v1alpha1"),
        ([{"name": "v1alpha1", "served": True, "storage": True}, {"name": "v1beta1", "served": True}], "v1beta1"),
        ([{"name": "v1alpha1", "served": False}, {"name": "v1beta1", "served": True, "storage": True}], "v1beta1"),
    ],
)
def test_v1beta1_only_when_served(versions: list[dict[str, Any]], working: str) -> None:
    assert working_version({"spec": {"versions": versions}}) == working
