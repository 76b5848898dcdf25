"""Objects stored by the first release (v1alpha1 only) survive the upgrade and end up stored as v1beta1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest

from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess, point_conversion_at
from node_maintenance.api import CRD_NAME

from .helpers import CRD_FILE, apply, crd_of_release, eventually, existing, get, replace_crd

pytestmark = pytest.mark.e2e
GROUP = "nodemaintenance.kubevirt.io"
NAMES = ("legacy-a", "legacy-b", "legacy-c")


def _stored_api_version(cluster: Cluster, name: str) -> str:
    raw = cluster.etcd_get(f"/registry/{GROUP}/nodemaintenances/{name}")
    assert raw is not None, f"{name} is not in etcd"
    return cast(str, json.loads(raw)["apiVersion"])


def test_objects_stored_as_v1alpha1_migrate_to_v1beta1(cluster: Cluster, operator: OperatorProcess, tmp_path: Path) -> None:
    assert operator.ca_pem is not None, "the operator serves a certificate of its own making"
    leftovers = existing(cluster, f"nodemaintenances.v1beta1.{GROUP}")["items"]
    assert not leftovers, f"other tests left NodeMaintenances behind: {[o['metadata']['name'] for o in leftovers]}"
    replace_crd(cluster, crd_of_release("0.1.0", tmp_path))
    try:
        apply(cluster, *[
            {"apiVersion": f"{GROUP}/v1alpha1", "kind": "NodeMaintenance", "metadata": {"name": name}, "spec": {"nodeName": name, "reason": "before the upgrade"}}
            for name in NAMES
        ])
        assert {_stored_api_version(cluster, n) for n in NAMES} == {f"{GROUP}/v1alpha1"}

        # The upgrade: the current CRD, its conversion pointed at the operator as OLM would do.
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_FILE))
        point_conversion_at(cluster, operator.webhook_url + "/convert", operator.ca_pem)
        crd = existing(cluster, "crd", CRD_NAME)
        assert crd["status"]["storedVersions"] == ["v1alpha1", "v1beta1"]
        for version in ("v1alpha1", "v1alpha3", "v1beta1"):
            for name in NAMES:
                obj = get(cluster, f"nodemaintenances.{version}.{GROUP}", name)
                assert obj is not None and obj["spec"]["reason"] == "before the upgrade", (version, name)
                assert obj["spec"].get("nodeName", name) == name

        operator.stop()
        operator.start()  # the elected instance migrates storage on start
        eventually(lambda: existing(cluster, "crd", CRD_NAME)["status"]["storedVersions"] == ["v1beta1"], "storedVersions == [v1beta1]")
        assert {_stored_api_version(cluster, n) for n in NAMES} == {f"{GROUP}/v1beta1"}
        assert "storage version migration done" in operator.logs()
    finally:
        for name in NAMES:
            cluster.kubectl("delete", f"nodemaintenances.v1beta1.{GROUP}", name, "--ignore-not-found", "--timeout=60s")
        replace_crd(cluster, CRD_FILE)
        point_conversion_at(cluster, operator.webhook_url + "/convert", operator.ca_pem)
