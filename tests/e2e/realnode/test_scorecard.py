"""OperatorHub's own checks of the newest bundle: operator-sdk scorecard's basic and olm suites, as OperatorHub's
pipelines run them, from the configuration the bundle ships, in pods on the real node of a namespace that
enforces the `restricted` Pod Security Standard, from the scorecard images this project builds from
operator-sdk's pinned module."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from devcluster import toolchain
from devcluster.cluster import Cluster
from devcluster.opm_image import build_scorecard_images
from node_maintenance_packaging import cli
from node_maintenance_packaging.bundle import SCORECARD_TESTS

from ...releases import HEAD
from ..helpers import eventually
from .bundle_install import restricted_namespace

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]
NAMESPACE = "scorecard"


def test_the_scorecard_s_basic_and_olm_suites_pass_for_the_newest_bundle(real_cluster: Cluster, tmp_path: Path) -> None:
    assert real_cluster.registry is not None
    registry = real_cluster.registry.host
    untar_image = build_scorecard_images(registry)
    # The newest bundle as released, its scorecard configuration naming the test image just pushed.
    shutil.copy(ROOT / "releases.yaml", tmp_path / "releases.yaml")
    assert cli.main(["bundle", "--root", str(tmp_path), "--release", HEAD, "--registry", registry, "--out", str(tmp_path / "out")]) == 0
    bundle = tmp_path / "out" / "bundle"
    restricted_namespace(real_cluster, NAMESPACE)
    eventually(lambda: real_cluster.kubectl("get", "serviceaccount", "default", "-n", NAMESPACE, check=False).returncode == 0,
               "the namespace's default ServiceAccount")
    run = subprocess.run(
        [str(toolchain.ensure(["operator-sdk"])["operator-sdk"]), "scorecard", str(bundle), f"--kubeconfig={real_cluster.kubeconfig}",
         f"--namespace={NAMESPACE}", "--service-account=default", f"--untar-image={untar_image}", "--pod-security=restricted",
         "--wait-time=240s", "--output=json"],
        capture_output=True, text=True, timeout=300,
    )
    assert run.stdout, run.stderr
    results = {(item["spec"]["labels"]["suite"], result["name"]): result for item in json.loads(run.stdout)["items"]
               for result in item["status"]["results"]}
    assert set(results) == set(SCORECARD_TESTS), run.stderr
    failed = {key: (result["state"], result.get("errors"), result.get("log")) for key, result in results.items() if result["state"] != "pass"}
    assert not failed
    assert run.returncode == 0, run.stderr
