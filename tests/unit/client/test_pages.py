"""Collections are read a page at a time: the storage migration and the admission webhook list a fleet's
NodeMaintenances in pages of PAGE, following each page's continue token to the end."""

from __future__ import annotations

from typing import Any

from node_maintenance.api import HUB
from node_maintenance.api.paths import NODE_MAINTENANCE_CRD, nm_path
from node_maintenance.client import pages
from node_maintenance.runtime.storage import migrate_storage_version
from tests.unit.builders import FakeApi, nm


def _page(names: list[str], token: str = "") -> dict[str, Any]:
    return {"metadata": {"resourceVersion": "7", **({"continue": token} if token else {})}, "items": [nm(name) for name in names]}


def test_every_page_is_read_following_its_continue_token() -> None:
    api = FakeApi()
    api.script("GET", nm_path(), _page(["a", "b"], "t1"), _page(["c"], "t2"), _page(["d"]))
    assert [item["metadata"]["name"] for item in pages.items(api.blocking(), nm_path(), {"labelSelector": "x"})] == ["a", "b", "c", "d"]
    asked = [call.query for call in api.calls_to("GET", nm_path())]
    assert asked == [{"labelSelector": "x", "limit": str(pages.PAGE)}, {"labelSelector": "x", "limit": str(pages.PAGE), "continue": "t1"},
                     {"labelSelector": "x", "limit": str(pages.PAGE), "continue": "t2"}]


def test_the_storage_migration_rewrites_the_objects_of_every_page() -> None:
    api = FakeApi({NODE_MAINTENANCE_CRD: {"status": {"storedVersions": ["v1alpha1", HUB]}},
                   **{nm_path(name): nm(name) for name in ("a", "b", "c")}})
    api.script("GET", nm_path(), _page(["a", "b"], "t1"), _page(["c"]))
    assert migrate_storage_version(api.blocking()) == 3
    assert [call.path for call in api.calls_to("PUT")] == [nm_path(name) for name in ("a", "b", "c")]
