"""Old and new clients share one CRD: every version reads every object, round trips lose nothing,
the apiserver's own CEL rule guards spec.nodeName, and the admission webhook refuses bad requests."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from devcluster.cluster import Cluster
from devcluster.operator import OperatorProcess

from .helpers import apply, eventually, get

pytestmark = pytest.mark.e2e

GROUP = "nodemaintenance.kubevirt.io"
VERSIONS = ("v1alpha1", "v1alpha3", "v1beta1")
PARKED = "conversion.nodemaintenance.kubevirt.io/v1beta1-fields"
DRAIN = {"podSelector": {"matchLabels": {"tier": "web"}}, "gracePeriodSeconds": 7, "timeoutSeconds": 600}


def _resource(version: str) -> str:
    return f"nodemaintenances.{version}.{GROUP}"


def _read(cluster: Cluster, version: str, name: str) -> dict[str, Any]:
    obj = get(cluster, _resource(version), name)
    assert obj is not None, f"{name} not readable as {version}"
    return obj


def _manifest(version: str, name: str, node: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"reason": f"created as {version}"}
    if version != "v1alpha3":  # v1alpha3 names the node by the object's own name
        spec["nodeName"] = node
    if version == "v1beta1":
        spec["drain"] = DRAIN
    return {"apiVersion": f"{GROUP}/{version}", "kind": "NodeMaintenance", "metadata": {"name": name}, "spec": spec}


def _expected_spec(created: str, read: str, node: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"reason": f"created as {created}"}
    if not (created == "v1alpha3" and read == "v1alpha3"):
        spec["nodeName"] = node
    if created == "v1beta1" and read == "v1beta1":
        spec["drain"] = DRAIN
    return spec


@pytest.mark.parametrize("created", VERSIONS)
def test_each_version_reads_objects_created_in_every_version(cluster: Cluster, operator: OperatorProcess, created: str) -> None:
    """3x3: created in one version, read in each, field by field as the conversion promises."""
    name = f"ghost-{created}-{uuid.uuid4().hex[:6]}"  # no such node: the operator leaves the spec alone
    apply(cluster, _manifest(created, name, name))
    try:
        for read in VERSIONS:
            obj = _read(cluster, read, name)
            assert obj["apiVersion"] == f"{GROUP}/{read}"
            assert obj["spec"] == _expected_spec(created, read, name), (created, read)
            annotations = obj["metadata"].get("annotations") or {}
            parked = json.loads(annotations[PARKED]) if PARKED in annotations else {}
            if read == "v1beta1":
                assert PARKED not in annotations
                assert ("conversion.nodemaintenance.kubevirt.io/implicit-node-name" in annotations) == (created == "v1alpha3")
            elif created == "v1beta1":
                assert parked["spec"] == {"drain": DRAIN}
            # Status written by the operator in v1beta1 shows in every version, within what it can hold.
            status = eventually(lambda: _read(cluster, read, name).get("status"), f"status of {name} as {read}")
            assert status["phase"] == "Failed"
            assert ("drainProgress" in status) == (read == "v1beta1")
    finally:
        cluster.kubectl("delete", _resource("v1beta1"), name, "--wait=true", "--timeout=60s")


def _replace(cluster: Cluster, version: str, name: str, reason: str) -> None:
    """Read, edit and replace in ``version``, as an old client does; read again when the operator wrote the
    status meanwhile (409 Conflict), as such a client retries."""
    for _ in range(5):
        obj = _read(cluster, version, name)
        obj["spec"]["reason"] = reason
        obj["metadata"].pop("managedFields", None)
        result = cluster.kubectl("replace", "-f", "-", input=json.dumps(obj), check=False)
        if result.returncode == 0:
            return
        assert "Conflict" in result.stderr, result.stderr
    raise AssertionError(f"replacing {name} in {version} conflicted five times in a row")


def test_old_clients_editing_reason_keep_the_drain_settings(cluster: Cluster, operator: OperatorProcess) -> None:
    name = f"ghost-roundtrip-{uuid.uuid4().hex[:6]}"
    apply(cluster, _manifest("v1beta1", name, name))
    try:
        for version, reason in (("v1alpha1", "edited by v1alpha1"), ("v1alpha3", "edited by v1alpha3")):
            _replace(cluster, version, name, reason)
            current = _read(cluster, "v1beta1", name)
            assert current["spec"]["reason"] == reason
            assert current["spec"]["drain"] == DRAIN
            assert not any(k.startswith("conversion.") for k in current["metadata"].get("annotations") or {})
    finally:
        cluster.kubectl("delete", _resource("v1beta1"), name, "--timeout=60s")


def test_node_name_is_immutable_by_the_apiservers_own_rule(cluster: Cluster, operator: OperatorProcess) -> None:
    name = f"ghost-cel-{uuid.uuid4().hex[:6]}"
    apply(cluster, _manifest("v1beta1", name, name))
    try:
        result = cluster.kubectl(
            "patch", _resource("v1beta1"), name, "--type=merge", "-p", '{"spec":{"nodeName":"another-node"}}', check=False
        )
        assert result.returncode != 0
        assert "spec.nodeName is immutable" in result.stderr
        assert "admission webhook" not in result.stderr
    finally:
        cluster.kubectl("delete", _resource("v1beta1"), name, "--timeout=60s")


def test_schema_rejects_bad_input_with_the_field_named(cluster: Cluster, operator: OperatorProcess) -> None:
    bad = _manifest("v1beta1", f"bad-{uuid.uuid4().hex[:6]}", "Not_A_Node")
    bad["spec"]["drain"] = {"timeoutSeconds": -1}
    result = cluster.kubectl("create", "-f", "-", input=json.dumps(bad), check=False)
    assert result.returncode != 0
    assert "spec.nodeName" in result.stderr and "spec.drain.timeoutSeconds" in result.stderr


def test_field_selector_and_printer_columns(cluster: Cluster, operator: OperatorProcess) -> None:
    name = f"ghost-cols-{uuid.uuid4().hex[:6]}"
    apply(cluster, _manifest("v1beta1", name, name))
    try:
        listing = cluster.kubectl("get", "nm", "--field-selector", f"spec.nodeName={name}").stdout.splitlines()
        assert listing[0].split() == ["NAME", "NODE", "PHASE", "PROGRESS", "AGE"]
        assert len(listing) == 2 and listing[1].split()[:2] == [name, name]
    finally:
        cluster.kubectl("delete", _resource("v1beta1"), name, "--timeout=60s")


def test_admission_refuses_missing_nodes_and_duplicates(cluster: Cluster, operator: OperatorProcess, admission_webhook: str, nodes: Callable[..., list[str]]) -> None:
    missing = cluster.kubectl("create", "-f", "-", input=json.dumps(_manifest("v1alpha1", "nm-missing", "no-such-node")), check=False)
    assert missing.returncode != 0 and "node 'no-such-node' does not exist" in missing.stderr
    (target,) = nodes(1)
    apply(cluster, _manifest("v1beta1", f"first-{target}", target))
    try:
        # v1alpha3 names the node through metadata.name: resolved before comparing.
        duplicate = cluster.kubectl("create", "-f", "-", input=json.dumps(_manifest("v1alpha3", target, target)), check=False)
        assert duplicate.returncode != 0
        assert f"already in maintenance by NodeMaintenance first-{target}" in duplicate.stderr
    finally:
        cluster.kubectl("delete", _resource("v1beta1"), f"first-{target}", "--timeout=60s")


def test_admission_guards_etcd_quorum_on_control_plane_nodes(cluster: Cluster, operator: OperatorProcess, admission_webhook: str, nodes: Callable[..., list[str]],
                                                             etcd_guard_namespace: str) -> None:
    (master,) = nodes(1, labels={"node-role.kubernetes.io/control-plane": ""})
    guard = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "etcd-guard-pdb", "namespace": etcd_guard_namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guard"}}},
    }
    apply(cluster, guard)
    try:
        eventually(lambda: "disruptionsAllowed" in ((get(cluster, "pdb", "etcd-guard-pdb", "-n", etcd_guard_namespace) or {}).get("status") or {}), "guard PDB status")
        refused = cluster.kubectl("create", "-f", "-", input=json.dumps(_manifest("v1beta1", f"nm-{master}", master)), check=False)
        assert refused.returncode != 0
        assert f"node {master!r} is a control-plane node" in refused.stderr and "openshift-etcd/etcd-guard-pdb" in refused.stderr
    finally:
        cluster.kubectl("delete", "pdb", "etcd-guard-pdb", "-n", etcd_guard_namespace, "--ignore-not-found")
    allowed = cluster.kubectl("create", "-f", "-", input=json.dumps(_manifest("v1beta1", f"nm-{master}", master)), check=False)
    assert allowed.returncode == 0, allowed.stderr
    cluster.kubectl("delete", _resource("v1beta1"), f"nm-{master}", "--timeout=60s")


@pytest.mark.parametrize("version", ["v1alpha1", "v1alpha3"])
def test_old_versions_warn_and_name_v1beta1(cluster: Cluster, operator: OperatorProcess, version: str) -> None:
    result = cluster.kubectl("get", _resource(version))
    assert f"Warning: {GROUP}/{version} NodeMaintenance is deprecated" in result.stderr
    assert f"{GROUP}/v1beta1" in result.stderr
    assert "Warning" not in cluster.kubectl("get", _resource("v1beta1")).stderr
