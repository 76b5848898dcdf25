"""The scorecard certification runs on a bundle: operator-sdk scorecard's basic and olm suites, from the
configuration the newest bundle ships, in pods on the real node of a namespace that enforces the `restricted`
Pod Security Standard. The configuration names upstream's scorecard-test image; here the same release of it
runs, built from the operator-sdk module the tools pin, as every upstream tool here is."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from devcluster import toolchain
from devcluster.cluster import Cluster
from devcluster.upstream_images import build_scorecard_images
from node_maintenance_packaging.bundle import SCORECARD_IMAGE, SCORECARD_TESTS

from ...releases import NEWEST
from ..helpers import eventually
from .bundle_install import restricted_namespace

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]
NAMESPACE = "scorecard"


def test_the_scorecard_s_basic_and_olm_suites_pass_for_the_newest_bundle(real_cluster: Cluster, tmp_path: Path) -> None:
    assert real_cluster.registry is not None and NEWEST.scorecard is not None
    test_image, untar_image = build_scorecard_images(real_cluster.registry.host, NEWEST.scorecard)
    bundle = tmp_path / "bundle"
    shutil.copytree(ROOT / "bundle", bundle)
    shipped = (bundle / "tests/scorecard/config.yaml").read_text()
    config = tmp_path / "config.yaml"
    config.write_text(shipped.replace(f"{SCORECARD_IMAGE}:{NEWEST.scorecard}", test_image))
    assert {test["image"] for stage in yaml.safe_load(config.read_text())["stages"] for test in stage["tests"]} == {test_image}
    restricted_namespace(real_cluster, NAMESPACE)
    eventually(lambda: real_cluster.kubectl("get", "serviceaccount", "default", "-n", NAMESPACE, check=False).returncode == 0,
               "the namespace's default ServiceAccount")
    run = subprocess.run(
        [str(toolchain.binary("operator-sdk")), "scorecard", str(bundle), f"--config={config}", f"--kubeconfig={real_cluster.kubeconfig}",
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
