"""The operator image: the Dockerfile built by a container engine from a Python base and nmo-pack's
daemonless build of the same Dockerfile give the same file tree and the same configuration; and the daemonless
build is reproducible: the image cache hands out what a fresh build gives."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster.registry import Registry
from node_maintenance_packaging.imagetool import LAYOUT_TAG, Builder, pick
from node_maintenance_packaging.operator_image import (
    BUILD_BASE_PACKAGES,
    base_layout,
    build_operator_image,
    image_cache,
    inputs_key,
    operator_layout,
    store,
)

from ..releases import HEAD

# Each test's limit, the first's above all, counts the module fixture's build by a container engine: its build stage
# installs every wheel under buildah's vfs storage, 154 s on an idle machine and more than 600 s beside the end-to-end
# clusters.
pytestmark = [pytest.mark.tools, pytest.mark.timeout(1800)]
ROOT = Path(__file__).resolve().parents[2]
VERSION = HEAD  # the release the work tree builds
APP = "opt/node-maintenance-operator"


@pytest.fixture(scope="module")
def registry() -> Iterator[Registry]:
    with Registry() as running:
        yield running


def _push(source: str, reference: str) -> None:
    subprocess.run(["skopeo", "copy", "--dest-tls-verify=false", source, f"docker://{reference}"], check=True, capture_output=True)


def _unpack(reference: str, into: Path) -> tuple[Path, dict[str, Any]]:
    layout = into / "layout"
    subprocess.run(["skopeo", "copy", "--src-tls-verify=false", f"docker://{reference}", f"oci:{layout}:pulled"], check=True, capture_output=True)
    rootfs = into / "rootfs"
    subprocess.run(["umoci", "raw", "unpack", "--rootless", "--image", f"{layout}:pulled", str(rootfs)], check=True, capture_output=True)
    config = json.loads(subprocess.run(["skopeo", "inspect", "--config", "--tls-verify=false", f"docker://{reference}"],
                                       check=True, capture_output=True, text=True).stdout)["config"]
    return rootfs, config


def _tree(root: Path) -> dict[str, tuple[str, int, str]]:
    """Every path under ``root``: its type, permission bits and (for files) content hash."""
    tree = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if path.is_symlink():
            tree[str(path.relative_to(root))] = ("link", 0, os.readlink(path))
        elif path.is_dir():
            tree[str(path.relative_to(root))] = ("dir", info.st_mode & 0o7777, "")
        else:
            tree[str(path.relative_to(root))] = ("file", info.st_mode & 0o7777, hashlib.sha256(path.read_bytes()).hexdigest())
    return tree


@pytest.fixture(scope="module")
def base(registry: Registry) -> str:
    """The Python base the image cache builds on, pushed as an image of its own."""
    pushed = f"{registry.host}/python-base:test"
    _push(base_layout(), pushed)
    return pushed


@pytest.fixture(scope="module")
def daemonless(registry: Registry) -> str:
    """nmo-pack's daemonless build of the operator image, afresh (no cache), on the Python base the image cache builds
    on (the image ``base`` pushes): its digest."""
    assembler = Builder(pick("umoci"), tls_verify=False)
    try:
        return build_operator_image(assembler, ROOT, VERSION, f"{registry.host}/daemonless:{VERSION}")
    finally:
        assembler.close()


def _engine_build(registry: Registry, base: str, scratch: Path) -> str:
    """The Dockerfile built by a container engine and pushed: its reference. The build is kept outside the work tree,
    keyed by its inputs (the Dockerfile's files, both bases, the engine's version), as the image cache keeps the
    daemonless one: it takes minutes, and a later run from the same inputs pushes what it built."""
    engine = Builder(pick("buildah"), tls_verify=False, run_volumes=("/etc/ssl/certs:/etc/ssl/certs:ro",))
    pushed = f"{registry.host}/engine:{VERSION}"
    try:
        version = subprocess.run(["buildah", "--version"], check=True, capture_output=True, text=True).stdout.strip()
        inputs = {"VERSION": VERSION, "PYTHON_IMAGE": base_layout(), "BUILD_IMAGE": base_layout(packages=BUILD_BASE_PACKAGES), "ENGINE": version}
        cached = image_cache() / f"engine-{inputs_key(ROOT, inputs)}"
        if (cached / ".complete").exists():
            _push(f"oci:{cached}:{LAYOUT_TAG}", pushed)
            return pushed
        build_base = f"{registry.host}/python-build:test"
        _push(base_layout(packages=BUILD_BASE_PACKAGES), build_base)  # a build stage needs pip
        # The build stage fetches wheels: it trusts what this machine trusts.
        engine.build_and_push(ROOT, ROOT / "Dockerfile", pushed, {"PYTHON_IMAGE": base, "BUILD_IMAGE": build_base, "VERSION": VERSION})
    finally:
        engine.close()
    subprocess.run(["skopeo", "copy", "--src-tls-verify=false", f"docker://{pushed}", f"oci:{scratch}:{LAYOUT_TAG}"], check=True, capture_output=True)
    store(scratch, cached)
    return pushed


@pytest.fixture(scope="module")
def both(registry: Registry, base: str, daemonless: str,
         tmp_path_factory: pytest.TempPathFactory) -> tuple[tuple[Path, dict[str, Any]], tuple[Path, dict[str, Any]]]:
    _engine_build(registry, base, tmp_path_factory.mktemp("engine-build") / "oci")
    return (_unpack(f"{registry.host}/engine:{VERSION}", tmp_path_factory.mktemp("engine")),
            _unpack(f"{registry.host}/daemonless:{VERSION}", tmp_path_factory.mktemp("daemonless")))


def _own_record(path: str) -> bool:
    """Files each build writes with its own tools: bytecode of its own interpreter's patch release, and
    pip's record of the install (whose layout differs between pip releases). Their paths must still agree."""
    return path.endswith(".pyc") or path.endswith(".dist-info/RECORD")


def test_the_image_cache_holds_what_a_fresh_build_gives(daemonless: str) -> None:
    """``nmo-pack images --cache`` and the tests' published images take the operator image from the cache, perhaps
    built days before from the same inputs (``make image-cache``): only a reproducible build makes that the image a
    build gives now. It was not, while the wheel's build backend was the newest the index offered (dist-info/WHEEL)."""
    assembler = Builder(pick("umoci"), tls_verify=False)
    try:
        cached = operator_layout(assembler, ROOT, VERSION, f"cached:{VERSION}", cache=image_cache())
    finally:
        assembler.close()
    assert json.loads((cached / "index.json").read_text())["manifests"][0]["digest"] == daemonless


def test_both_ways_install_the_same_files(both: tuple[tuple[Path, dict[str, Any]], tuple[Path, dict[str, Any]]]) -> None:
    (engine_root, _), (daemonless_root, _) = both
    engine, daemonless = _tree(engine_root / APP), _tree(daemonless_root / APP)
    assert engine.keys() == daemonless.keys()
    assert {p: v[:2] for p, v in engine.items()} == {p: v[:2] for p, v in daemonless.items()}  # types and modes
    assert {p: v for p, v in engine.items() if daemonless[p] != v and not _own_record(p)} == {}
    assert any(p.startswith("node_maintenance/") for p in engine)
    # The base is the same image both ways: the whole root filesystem matches outside the application.
    outside = {p: v for p, v in _tree(engine_root).items() if not p.startswith(APP)}
    assert outside == {p: v for p, v in _tree(daemonless_root).items() if not p.startswith(APP)}


def test_both_ways_configure_the_image_alike(both: tuple[tuple[Path, dict[str, Any]], tuple[Path, dict[str, Any]]]) -> None:
    (_, engine), (_, daemonless) = both
    for key in ("User", "Env", "Entrypoint", "ExposedPorts", "WorkingDir"):
        assert engine.get(key) == daemonless.get(key), key
    labels = {k: v for k, v in engine["Labels"].items() if k != "io.buildah.version"}
    assert labels == daemonless["Labels"] and labels["org.opencontainers.image.version"] == VERSION


def test_the_image_holds_no_compiler_pip_or_source_tree(both: tuple[tuple[Path, dict[str, Any]], tuple[Path, dict[str, Any]]]) -> None:
    _, (root, config) = both
    assert config["User"] == "65532:65532"
    for absent in ("usr/bin/gcc", "usr/bin/cc", "usr/lib/python3/dist-packages/pip", "src", f"{APP}/bin"):
        assert not (root / absent).exists(), absent
    assert not list((root / APP).glob("pip")) and not list((root / APP).rglob("pyproject.toml"))
    assert (root / "usr/bin/python3").exists()
