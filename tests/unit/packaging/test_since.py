"""Schema fields and examples marked ``since`` ship from that release on: the bundles of the releases before
it stay as they were released, and nmo-pack refuses a ``since`` naming no declared release."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import semver

from node_maintenance import api
from node_maintenance_packaging import cli
from node_maintenance_packaging.render import catalog_output, load_inputs
from tests.releases import RELEASES
from tests.unit.rendering import ROOT, load_yaml, render_bundle

CSV = "bundle/manifests/node-maintenance-operator.clusterserviceversion.yaml"
HINTS = [(resource, version, where, since) for resource in api.RESOURCES for version in resource.versions
         for where, since in resource.since_hints(version)]


def _field(schema: dict[str, Any], where: str) -> dict[str, Any] | None:
    """The schema of the field at ``where`` (``spec.drain.escalation``, ``status.recovering[].node``), None
    when it is not there."""
    node: dict[str, Any] | None = schema
    for name in where.split("."):
        items = name.endswith("[]")
        node = (node or {}).get("properties", {}).get(name.removesuffix("[]"))
        if node is not None and items:
            node = node["items"]
    return node


def _descriptors(csv: dict[str, Any], resource: api.Resource, version: str) -> set[str]:
    (owned,) = [o for o in csv["spec"]["customresourcedefinitions"]["owned"] if o["kind"] == resource.kind and o["version"] == version]
    return {f"spec.{d['path']}" for d in owned["specDescriptors"]} | {f"status.{d['path']}" for d in owned["statusDescriptors"]}


def _examples(csv: dict[str, Any]) -> list[dict[str, Any]]:
    examples: list[dict[str, Any]] = json.loads(csv["metadata"]["annotations"]["alm-examples"])
    return examples


def _has_descriptor_hint(resource: api.Resource, version: str, where: str) -> bool:
    node = resource.load(version)["openAPIV3Schema"]
    for name in where.split("."):
        node = node["properties"][name.removesuffix("[]")]
        node = node["items"] if name.endswith("[]") else node
    return api.DESCRIPTOR_HINT in node


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every release's bundle, rendered once for the module."""
    out = tmp_path_factory.mktemp("bundles")
    return {version: render_bundle(out, version) for version in RELEASES}


def test_a_field_is_in_the_crd_and_the_csv_from_its_since_release_on_only(bundles: dict[str, Path]) -> None:
    fields = [hint for hint in HINTS if not hint[2].startswith("examples[")]
    assert fields, "the schemas mark the fields later releases added"
    for release, bundle in bundles.items():
        csv = load_yaml(bundle / CSV)
        schemas = {
            (crd["spec"]["names"]["kind"], served["name"]): served["schema"]["openAPIV3Schema"]
            for crd in (load_yaml(path) for path in (bundle / "bundle/manifests").glob(f"{api.GROUP}_*.yaml"))
            for served in crd["spec"]["versions"]
        }
        for resource, version, where, since in fields:
            if (resource.kind, version) not in schemas:
                continue
            shipped = semver.Version.parse(release) >= semver.Version.parse(since)
            assert (_field(schemas[resource.kind, version], where) is not None) == shipped, (release, resource.kind, where, since)
            if _has_descriptor_hint(resource, version, where):
                assert (where in _descriptors(csv, resource, version)) == shipped, (release, where)


def test_an_example_is_in_the_csv_from_its_since_release_on_only(bundles: dict[str, Path]) -> None:
    examples = [(resource, version, resource.load(version)["examples"][int(where[len("examples["):-1])], since)
                for resource, version, where, since in HINTS if where.startswith("examples[")]
    assert examples, "the schemas hold examples later releases added"
    for resource, version, example, since in examples:
        for release, bundle in bundles.items():
            shown = [{k: v for k, v in e.items() if k not in ("apiVersion", "kind")} for e in _examples(load_yaml(bundle / CSV))
                     if (e["kind"], e["apiVersion"]) == (resource.kind, f"{api.GROUP}/{version}")]
            expected = {k: v for k, v in example.items() if k != api.SINCE_HINT}
            assert (expected in shown) == (semver.Version.parse(release) >= semver.Version.parse(since)), (release, example)


def _hint_keys(node: Any, where: str = "") -> Iterator[str]:
    """Where a ``since`` hint is left in a schema, an object or a descriptor (a field *named* since is not one)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == api.SINCE_HINT:
                yield where
            if key == "properties" and isinstance(value, dict):
                for name, child in value.items():
                    yield from _hint_keys(child, f"{where}.{name}")
            else:
                yield from _hint_keys(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _hint_keys(item, f"{where}[{index}]")


def test_no_since_hint_reaches_a_rendered_crd_csv_or_example(bundles: dict[str, Path]) -> None:
    for release, bundle in bundles.items():
        manifests = sorted((bundle / "bundle/manifests").glob("*.yaml"))
        assert manifests
        for path in manifests:
            document = load_yaml(path)
            assert list(_hint_keys(document)) == [], (release, path.name)
            if document["kind"] == "ClusterServiceVersion":
                assert list(_hint_keys(_examples(document))) == [], release


def _as_released(node: dict[str, Any], release: semver.Version) -> dict[str, Any]:
    """A schema document as it stood when ``release`` was made: without the properties and examples added since."""
    def later(child: Any) -> bool:
        return isinstance(child, dict) and api.SINCE_HINT in child and semver.Version.parse(str(child[api.SINCE_HINT])) > release

    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: _as_released(child, release) for name, child in value.items() if not later(child)}
        elif key == "examples":
            out[key] = [example for example in value if not later(example)]
        elif isinstance(value, dict):
            out[key] = _as_released(value, release)
        else:
            out[key] = value
    return out


def _reading(monkeypatch: pytest.MonkeyPatch, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Make every schema document read as ``change`` turns it."""
    read = api.read_schema
    monkeypatch.setattr(api, "read_schema", lambda schema_dir, version: change(read(schema_dir, version)))


@pytest.mark.parametrize("release", RELEASES)
def test_each_committed_catalog_bundle_is_what_its_release_rendered_from_the_schemas_of_its_day(
    release: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fields a later release added leave the committed bundle of an earlier one byte for byte as it was
    rendered before they existed."""
    name = f"catalog/node-maintenance-operator/bundles/node-maintenance-operator.v{release}.yaml"

    def render() -> bytes:
        output = catalog_output(load_inputs(ROOT / "releases.yaml", through=release))
        (content,) = [f.content for f in output.files if str(f.path) == name]
        return content

    now = render()
    _reading(monkeypatch, lambda document: _as_released(document, semver.Version.parse(release)))
    assert now == render() == (ROOT / name).read_bytes()
    assert list(_hint_keys(load_yaml(ROOT / name))) == []


def test_a_since_naming_no_declared_release_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    undeclared = str(semver.Version.parse(RELEASES[-1]).bump_major())

    def mark(document: dict[str, Any]) -> dict[str, Any]:
        if "maxParallel" in document["openAPIV3Schema"]["properties"]["spec"]["properties"]:
            document = json.loads(json.dumps(document))
            document["openAPIV3Schema"]["properties"]["spec"]["properties"]["maxParallel"][api.SINCE_HINT] = undeclared
        return document

    _reading(monkeypatch, mark)
    (tmp_path / "releases.yaml").write_bytes((ROOT / "releases.yaml").read_bytes())
    capsys.readouterr()
    assert cli.main(["crd", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"NodeMaintenancePolicy v1beta1 ({api.POLICY.schema_file('v1beta1')}): spec.maxParallel: since: {undeclared} is not a release in releases.yaml" in err
    assert f"name the release that first ships it (one of {', '.join(RELEASES)}), or declare {undeclared} in releases.yaml first" in err
    assert "Traceback" not in err
