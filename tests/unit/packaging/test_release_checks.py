"""nmo-pack refuses releases OLM would reject or mishandle, naming the release, the field and the fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from node_maintenance_packaging import cli
from tests.releases import HEAD, NEXT
from tests.unit.rendering import ROOT, append_release, render_edited

V030_END = '    skipRange: ">=0.1.0 <0.3.0"\n    relatedImages: [operator]\n'


def test_an_upgrade_dropping_the_stored_version_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = render_edited(tmp_path, lambda t: append_release(t, f"""  - version: {NEXT}
    createdAt: "2026-03-01T00:00:00Z"
    maturity: beta
    channels: [stable, candidate]
    served: [v1alpha1, v1alpha3]
    storage: v1alpha1
    features: [conversion]
    owns:
      NodeMaintenancePolicy: {{served: [v1beta1], storage: v1beta1}}
    replaces: {HEAD}
    relatedImages: [operator]
"""), capsys)
    assert code == 2
    assert f"release {NEXT}: served: drops v1beta1, which {HEAD} stores" in err
    assert "status.storedVersions" in err and f"keep serving v1beta1 in {NEXT}" in err
    assert "Traceback" not in err


def test_dropping_the_previous_storage_version_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = render_edited(tmp_path, lambda t: t.replace(
        "    served: [v1alpha1, v1alpha3, v1beta1]\n", "    served: [v1alpha3, v1beta1]\n"
    ), capsys)
    assert code == 2
    assert "release 0.3.0: served: drops v1alpha1, which 0.2.0 stores" in err
    assert "which 0.1.0 stores" in err  # the skipRange edge from 0.1.0 counts too


def test_two_storage_versions_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = render_edited(tmp_path, lambda t: t.replace("    storage: v1beta1\n", "    storage: [v1alpha1, v1beta1]\n"), capsys)
    assert code == 2
    assert "release 0.3.0: storage: lists 2 versions (v1alpha1, v1beta1) but a CRD stores exactly one" in err
    assert "keep only the version new objects are written in" in err


def test_differing_schemas_without_conversion_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = render_edited(tmp_path, lambda t: t.replace(
        "    features: [conversion]\n    replaces: 0.1.0\n", "    features: []\n    replaces: 0.1.0\n"
    ), capsys)
    assert code == 2
    assert "release 0.2.0: features: serves v1alpha1 and v1alpha3, whose schemas differ at" in err
    assert "openAPIV3Schema.properties.spec.required" in err
    assert "add `conversion` to the release's features" in err


def test_an_image_missing_from_related_images_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = render_edited(tmp_path, lambda t: t.replace(V030_END, '    skipRange: ">=0.1.0 <0.3.0"\n    relatedImages: []\n'), capsys)
    assert code == 2
    assert "release 0.3.0: relatedImages: the CSV uses ghcr.io/node-maintenance-operator/node-maintenance-operator:0.3.0" in err
    assert "add the image's role" in err


def test_an_edge_to_a_newer_release_is_out_of_semver_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def edit(text: str) -> str:
        text = text.replace("    features: [conversion]\n    replaces: 0.1.0\n", "    features: [conversion]\n    replaces: 0.3.0\n")
        return text.replace("    replaces: 0.2.0\n", "    replaces: 0.1.0\n")

    code, err = render_edited(tmp_path, edit, capsys)
    assert code == 2
    assert "release 0.2.0: replaces: 0.3.0 is not older, so channel stable is out of semver order" in err


def test_releases_listed_out_of_order_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def edit(text: str) -> str:
        head, rest = text.split("  - version: 0.1.0\n", 1)
        first, others = rest.split("\n\n", 1)
        return head + others.rstrip("\n") + "\n\n  - version: 0.1.0\n" + first + "\n"

    code, err = render_edited(tmp_path, edit, capsys)
    assert code == 2
    assert f"release 0.1.0: version: listed after {HEAD} but not newer" in err


def test_a_channel_with_two_heads_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = render_edited(tmp_path, lambda t: t.replace("    features: [conversion]\n    replaces: 0.1.0\n", "    features: [conversion]\n"), capsys)
    assert code == 2
    assert f"channel stable: 2 heads (0.1.0, {HEAD})" in err


def test_a_replaced_release_missing_from_the_channel_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def edit(text: str) -> str:
        head, rest = text.split("  - version: 0.2.0\n", 1)
        return head + "  - version: 0.2.0\n" + rest.replace("    channels: [stable, candidate]\n", "    channels: [candidate]\n", 1)

    code, err = render_edited(tmp_path, edit, capsys)
    assert code == 2
    assert "release 0.3.0: replaces: 0.2.0 is not in channel stable" in err


@pytest.mark.parametrize(("tag", "message"), [
    ("latest", "gives 'latest'; write a versioned image tag, e.g. v{major}"),
    ("v{minor}", "cannot be formatted ('minor'); write a versioned tag, e.g. v{major}"),
])
def test_a_catalog_tag_that_is_not_versioned_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], tag: str, message: str) -> None:
    code, err = render_edited(tmp_path, lambda t: t.replace("catalogTag: v{major}\n", f"catalogTag: {tag}\n"), capsys)
    assert code == 2
    assert f"releases.yaml: catalogTag: {tag!r} {message}" in err


def test_the_shipped_releases_pass_every_check(tmp_path: Path) -> None:
    shutil.copy(ROOT / "releases.yaml", tmp_path / "releases.yaml")
    assert cli.main(["crd", "--root", str(tmp_path)]) == 0
