"""The operator waits for a CRD that serves v1beta1 (an OLM upgrade may still have an older one in place)."""

from __future__ import annotations

from typing import Any

import pytest

from node_maintenance.storage_migration import CRD_PATH, hub_served


class _CRDOnly:
    """Answers the one request hub_served makes: GET of our CRD."""

    def __init__(self, versions: list[dict[str, Any]]) -> None:
        self.versions = versions

    def request(self, method: str, path: str) -> dict[str, Any]:
        assert (method, path) == ("GET", CRD_PATH)
        return {"spec": {"versions": self.versions}}


@pytest.mark.parametrize(
    ("versions", "served"),
    [
        ([{"name": "v1alpha1", "served": True}], False),  # release 0.1.0's CRD
        ([{"name": "v1alpha1", "served": True}, {"name": "v1alpha3", "served": True}], False),  # 0.2.0's
        ([{"name": "v1alpha1", "served": True}, {"name": "v1beta1", "served": False}], False),
        ([{"name": "v1alpha1", "served": True}, {"name": "v1beta1", "served": True}], True),
    ],
)
def test_hub_served_only_when_v1beta1_is_served(versions: list[dict[str, Any]], served: bool) -> None:
    assert hub_served(_CRDOnly(versions)) is served  # type: ignore[arg-type]
