"""The API reference: one page per version, rendered from the schemas, and stale pages caught by --check."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from node_maintenance import api
from node_maintenance_packaging import apidocs, cli
from tests.unit.rendering import ROOT


def _render(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "releases.yaml", root / "releases.yaml")
    assert cli.main(["docs", "--root", str(root)]) == 0
    return root / "docs"


def _paths(node: dict[str, Any], prefix: str) -> list[str]:
    found = []
    for name, child in node.get("properties", {}).items():
        found.append(f"{prefix}.{name}")
        found += _paths(child, f"{prefix}.{name}")
        found += _paths(child.get("items", {}), f"{prefix}.{name}[]")
    return found


def test_every_version_has_a_page_with_every_field_of_its_schema(tmp_path: Path) -> None:
    docs = _render(tmp_path / "repo")
    index = (docs / "api.md").read_text()
    pages = []
    for resource in api.RESOURCES:
        for version in resource.versions:
            name = apidocs.page_name(resource, version)
            pages.append(name)
            assert f"](api/{name})" in index
            page = (docs / "api" / name).read_text()
            assert f"apiVersion: {api.GROUP}/{version}" in page and f"kind: {resource.kind}" in page
            schema = resource.openapi_schema(version)
            for path in _paths(schema["properties"]["spec"], "spec") + _paths(schema["properties"]["status"], "status"):
                assert f"| `{path}` |" in page, f"{resource.kind} {version}: {path} missing"
            assert ("(deprecated)" in page.splitlines()[0]) == ("deprecation" in resource.load(version))
    assert sorted(p.name for p in (docs / "api").iterdir()) == sorted(pages)


def test_links_between_the_pages_resolve(tmp_path: Path) -> None:
    docs = _render(tmp_path / "repo")
    for page in [docs / "api.md", *(docs / "api").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#]+\.md)\)", page.read_text()):
            assert (page.parent / target).is_file(), f"{page.name} links to missing {target}"


@pytest.mark.parametrize("damage", ["edit", "stray"])
def test_check_catches_a_stale_or_stray_version_page(tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "repo"
    docs = _render(root)
    assert cli.main(["docs", "--check", "--root", str(root)]) == 0
    if damage == "edit":
        page = docs / "api" / "v1beta1.md"
        page.write_text(page.read_text().replace("spec.nodeName", "spec.node"))
    else:
        (docs / "api" / "v1gamma1.md").write_text("# gone\n")
    assert cli.main(["docs", "--check", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert ("docs/api/v1beta1.md" if damage == "edit" else "v1gamma1.md") in out
