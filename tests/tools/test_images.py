"""Bundle and catalog images, built without a Docker daemon, pushed to a real registry and judged by
upstream tools: skopeo reads the labels, opm renders the bundle, validates and serves the catalog."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import grpc
import pytest
import yaml

from devcluster import toolchain
from devcluster.processes import free_port
from devcluster.registry import Registry
from devcluster.upstream_images import build_opm_image

from ..releases import HEAD

pytestmark = pytest.mark.tools
ROOT = Path(__file__).resolve().parents[2]
VERSION = HEAD  # the release the work tree builds


def _nmo_pack(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "node_maintenance_packaging.cli", *args], cwd=ROOT, capture_output=True, text=True, env=env
    )


def _build(registry: str, opm_image: str, *extra: str) -> dict[str, tuple[str, str]]:
    """``nmo-pack images`` to ``registry``, the operator image taken from the image cache (``--cache``): these tests
    are about the bundle and catalog images; test_operator_image builds the operator image afresh, and shows the
    cache holds what a fresh build gives."""
    result = _nmo_pack("images", "--registry", registry, "--opm-image", opm_image, "--no-tls-verify", "--cache", *extra)
    assert result.returncode == 0, result.stderr
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    return {role: (reference, digest) for role, reference, digest in rows}


@pytest.fixture(scope="module")
def registry() -> Iterator[Registry]:
    with Registry() as running:
        yield running


@pytest.fixture(scope="module")
def opm_image(registry: Registry) -> str:
    return build_opm_image(registry.host)


@pytest.fixture(scope="module")
def built(registry: Registry, opm_image: str) -> dict[str, tuple[str, str]]:
    return _build(f"{registry.host}/nmo", opm_image)


def _skopeo_inspect(reference: str) -> dict[str, Any]:
    out = subprocess.run(["skopeo", "inspect", "--tls-verify=false", f"docker://{reference}"], capture_output=True, text=True, check=True)
    return cast(dict[str, Any], json.loads(out.stdout))


def test_bundle_image_labels_equal_the_bundle_annotations(built: dict[str, tuple[str, str]]) -> None:
    reference, digest = built["bundle"]
    inspected = _skopeo_inspect(reference)
    annotations = yaml.safe_load((ROOT / "bundle" / "metadata" / "annotations.yaml").read_text())["annotations"]
    labels = {k: v for k, v in inspected["Labels"].items() if k != "io.buildah.version"}
    assert labels == annotations
    assert inspected["Digest"] == digest


def _normalised(bundle: dict[str, Any]) -> dict[str, Any]:
    properties = sorted((p["type"], json.dumps(p["value"], sort_keys=True)) for p in bundle["properties"])
    return {"name": bundle["name"], "package": bundle["package"], "properties": properties}


def test_opm_renders_the_pushed_bundle_like_the_catalog_entry(built: dict[str, tuple[str, str]], registry: Registry, tmp_path: Path) -> None:
    reference, _ = built["bundle"]
    opm = str(toolchain.binary("opm"))
    # The catalog's form is the one OpenShift's catalogs accept from 4.17 on: opm's bundle-object-to-csv-metadata migration.
    rendered = subprocess.run([opm, "render", reference, "--use-http", "-o", "json", "--migrate-level", "bundle-object-to-csv-metadata"],
                              capture_output=True, text=True)
    assert rendered.returncode == 0, rendered.stderr
    from_image = json.loads(rendered.stdout)
    # The catalog as the tooling renders it for the same registry.
    shutil.copy(ROOT / "releases.yaml", tmp_path / "releases.yaml")
    result = _nmo_pack("catalog", "--registry", f"{registry.host}/nmo", "--root", str(tmp_path))
    assert result.returncode == 0, result.stderr
    entries = [
        doc
        for path in (tmp_path / "catalog").rglob("*.yaml")
        for doc in yaml.safe_load_all(path.read_text())
        if doc and doc.get("schema") == "olm.bundle" and doc["name"] == f"node-maintenance-operator.v{VERSION}"
    ]
    assert len(entries) == 1
    assert from_image["image"] == reference == entries[0]["image"]
    assert _normalised(from_image) == _normalised(entries[0])


def test_the_bundle_image_carries_the_rendered_bundle_file_for_file(built: dict[str, tuple[str, str]], registry: Registry, tmp_path: Path) -> None:
    """Manifests, metadata and, from 0.6.0, the scorecard's configuration, which OperatorHub's pipelines read from the image."""
    rootfs = _unpack(built["bundle"][0], tmp_path)
    shutil.copy(ROOT / "releases.yaml", tmp_path / "releases.yaml")
    result = _nmo_pack("bundle", "--registry", f"{registry.host}/nmo", "--root", str(tmp_path), "--out", str(tmp_path / "rendered"))
    assert result.returncode == 0, result.stderr
    rendered = tmp_path / "rendered" / "bundle"
    files = {p.relative_to(rendered): p.read_bytes() for p in rendered.rglob("*") if p.is_file()}
    assert Path("tests/scorecard/config.yaml") in files
    assert {p.relative_to(rootfs): p.read_bytes() for p in rootfs.rglob("*") if p.is_file()} == files


def test_the_images_that_run_code_are_built_for_the_architectures_the_csv_labels(built: dict[str, tuple[str, str]]) -> None:
    csv = yaml.safe_load((ROOT / "bundle" / "manifests" / "node-maintenance-operator.clusterserviceversion.yaml").read_text())
    labelled = {label.rsplit(".", 1)[1] for label in csv["metadata"]["labels"] if label.startswith("operatorframework.io/arch.")}
    for role in ("operator", "catalog"):
        inspected = _skopeo_inspect(built[role][0])
        assert (inspected["Os"], {inspected["Architecture"]}) == ("linux", labelled), role


def _unpack(reference: str, into: Path) -> Path:
    layout = into / "layout"
    subprocess.run(["skopeo", "copy", "--src-tls-verify=false", f"docker://{reference}", f"oci:{layout}:pulled"], check=True, capture_output=True)
    rootfs = into / "rootfs"
    subprocess.run(["umoci", "raw", "unpack", "--rootless", "--image", f"{layout}:pulled", str(rootfs)], check=True, capture_output=True)
    return rootfs


def _list_packages(port: int) -> list[str]:
    """api.Registry/ListPackages over gRPC: an empty request, a stream of PackageName{name = 1}."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_stream("/api.Registry/ListPackages", request_serializer=lambda _: b"", response_deserializer=lambda raw: raw)
        names = []
        for raw in call(None, timeout=10):
            assert raw[0] == 0x0A  # field 1, length-delimited
            length, offset, shift = 0, 1, 0
            while True:
                byte = raw[offset]
                length |= (byte & 0x7F) << shift
                offset, shift = offset + 1, shift + 7
                if byte < 0x80:
                    break
            names.append(raw[offset : offset + length].decode())
        return names


def test_catalog_image_validates_and_serves_the_package(built: dict[str, tuple[str, str]], tmp_path: Path) -> None:
    reference, _ = built["catalog"]
    inspected = _skopeo_inspect(reference)
    assert inspected["Labels"]["operators.operatorframework.io.index.configs.v1"] == "/configs"
    rootfs = _unpack(reference, tmp_path)
    configs = rootfs / "configs"
    opm = str(toolchain.binary("opm"))
    validated = subprocess.run([opm, "validate", str(configs)], capture_output=True, text=True)
    assert validated.returncode == 0, validated.stderr
    assert (rootfs / "bin" / "opm").exists(), "the catalog image carries the opm it runs"
    port = free_port()
    server = subprocess.Popen(
        [opm, "serve", str(configs), "-p", str(port), f"--pprof-addr=127.0.0.1:{free_port()}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                names = _list_packages(port)
                break
            except grpc.RpcError:
                assert time.monotonic() < deadline and server.poll() is None, "opm serve did not answer"
                time.sleep(0.3)
        assert names == ["node-maintenance-operator"]
    finally:
        server.terminate()
        server.wait(10)


def test_rebuilding_the_same_inputs_gives_the_same_bundle_digest(built: dict[str, tuple[str, str]], registry: Registry, opm_image: str) -> None:
    again = _build(f"{registry.host}/nmo", opm_image)
    assert again["bundle"][1] == built["bundle"][1]
    assert again["catalog"][1] == built["catalog"][1]


def test_pinned_release_build_references_the_bundle_by_digest(registry: Registry, opm_image: str, tmp_path: Path) -> None:
    images = _build(f"{registry.host}/pinned", opm_image, "--pin-digests")
    bundle_ref, bundle_digest = images["bundle"]
    rootfs = _unpack(images["catalog"][0], tmp_path)
    text = "".join(p.read_text() for p in (rootfs / "configs").rglob("*.yaml"))
    assert f"{bundle_ref.rsplit(':', 1)[0]}@{bundle_digest}" in text
    assert bundle_ref not in text  # the tag reference is gone from the catalog


def test_daemonless_umoci_path_builds_the_same_bundle_content(registry: Registry, opm_image: str) -> None:
    images = _build(f"{registry.host}/umoci", opm_image, "--tool", "umoci")
    labels = _skopeo_inspect(images["bundle"][0])["Labels"]
    annotations = yaml.safe_load((ROOT / "bundle" / "metadata" / "annotations.yaml").read_text())["annotations"]
    assert labels == annotations


def test_operator_dockerfile_passes_hadolint() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    result = subprocess.run([str(hadolint), "--failure-threshold", "info", str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "case, args, message",
    [
        ("registry unreachable", ["--registry", "127.0.0.1:9/nmo", "--opm-image", "127.0.0.1:9/opm:x"], "pushing 127.0.0.1:9/nmo/"),
        ("base image missing", ["--registry", "{registry}/nmo", "--opm-image", "{registry}/no-such-opm:v0"], "building {registry}/nmo/node-maintenance-operator-catalog"),
    ],
)
def test_clear_errors_without_tracebacks(registry: Registry, case: str, args: list[str], message: str) -> None:
    args = [a.format(registry=registry.host) for a in args]
    result = _nmo_pack("images", *args, "--no-tls-verify", "--cache")
    assert result.returncode == 2, case
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("nmo-pack: error: ") and message.format(registry=registry.host) in result.stderr, result.stderr


def test_no_image_tool_is_a_clear_error(tmp_path: Path) -> None:
    result = _nmo_pack("images", "--registry", "example.org/nmo", "--opm-image", "example.org/opm:1", env={**os.environ, "PATH": str(tmp_path)})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "no image tool found: install buildah" in result.stderr
