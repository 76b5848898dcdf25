"""Upgrades along our channels: step by step with manual approval (candidate), and straight to the head
through olm.skipRange with automatic approval (stable). No NodeMaintenance is lost on the way, and a
NodeMaintenancePolicy written for an older release keeps its spec and governs as before."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from devcluster.cluster import Cluster
from node_maintenance.api import GROUP, POLICY
from node_maintenance.api.paths import POLICY_VERSION

from ....releases import CRDS, HEAD, RELEASES, SERVED
from ...helpers import NMP, apply, create_nm, delete_nm, eventually, existing, get, nm_status
from .install import Install, crd, csv_name, nm_manifest, nm_uid, read_nm, served_versions

pytestmark = pytest.mark.e2e
# Tainted, so that no rolling operator pod lands on a node its maintenance drains.
TARGET_TAINTS = [{"key": "e2e/maintenance-target", "effect": "NoSchedule"}]


def _all_readable(cluster: Cluster, created: dict[str, tuple[str, str, str]], versions: list[str]) -> bool:
    """Every NodeMaintenance reads back in every served version, the same object with the same spec."""
    for name, (uid, node, reason) in created.items():
        for version in versions:
            obj = read_nm(cluster, version, name)
            if obj is None:
                return False
            assert obj["metadata"]["uid"] == uid, f"{name} was recreated"
            assert (obj["spec"].get("nodeName"), obj["spec"]["reason"]) == (node, reason), f"{name} as {version}: {obj['spec']}"
    return True


def _queued(cluster: Cluster, name: str) -> dict[str, Any]:
    return next((c for c in nm_status(cluster, name).get("conditions") or [] if c["type"] == "Queued"), {})


class OlderPolicy:
    """A NodeMaintenancePolicy written for the first release owning its CRD, with a limit, drain defaults and
    drain rules, over two nodes: one in maintenance from the start, so that a maintenance asked for after an
    upgrade has to wait for its slot, and gets it when that one ends."""

    def __init__(self, cluster: Cluster, nodes: Callable[..., list[str]]) -> None:
        self.cluster = cluster
        pool = {"e2e-pool": uuid.uuid4().hex[:8]}
        self.holding, self.waiting = nodes(2, labels=pool, taints=TARGET_TAINTS)
        self.name = f"older-{pool['e2e-pool']}"
        apply(cluster, {"apiVersion": f"{GROUP}/{POLICY_VERSION}", "kind": POLICY.kind, "metadata": {"name": self.name}, "spec": {
            "nodeSelector": {"matchLabels": pool},
            "maxParallel": 1,
            "drain": {"gracePeriodSeconds": 5, "timeoutSeconds": 900},
            "drainRules": [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "database"}}, "order": 10}],
        }})
        eventually(lambda: self._status().get("observedGeneration") == 1, f"policy {self.name} in force")
        self.written = existing(cluster, NMP, self.name)
        create_nm(cluster, f"{self.name}-first", self.holding)
        eventually(lambda: nm_status(cluster, f"{self.name}-first").get("phase") == "Succeeded", "the first maintenance drained")
        assert _queued(cluster, f"{self.name}-first")["reason"] == "SlotGranted"

    def _status(self) -> dict[str, Any]:
        return (get(self.cluster, NMP, self.name) or {}).get("status") or {}

    def assert_unchanged(self, version: str) -> None:
        """The spec as written, not one field defaulted in by the newer CRD, and no new generation."""
        now = get(self.cluster, NMP, self.name)
        assert now is not None, f"policy {self.name} lost in the upgrade to {version}"
        assert now["metadata"]["uid"] == self.written["metadata"]["uid"], f"policy {self.name} recreated"
        assert now["spec"] == self.written["spec"], f"after {version}: {now['spec']} != {self.written['spec']}"
        assert now["metadata"]["generation"] == self.written["metadata"]["generation"]

    def assert_governs(self) -> None:
        """A maintenance asked for now waits for the slot the first one holds, and takes it once that one ends."""
        second = f"{self.name}-second"
        create_nm(self.cluster, second, self.waiting)
        queued = eventually(lambda: (c := _queued(self.cluster, second)).get("reason") == "WaitingForSlot" and c, f"{second} in line")
        assert f"NodeMaintenancePolicy {self.name}" in queued["message"], queued
        assert nm_status(self.cluster, second)["phase"] == "Pending"
        delete_nm(self.cluster, f"{self.name}-first")
        eventually(lambda: _queued(self.cluster, second).get("reason") == "SlotGranted", f"{second} given the freed slot")
        eventually(lambda: nm_status(self.cluster, second).get("phase") == "Succeeded", f"{second} drained")


def test_manual_upgrade_through_every_release_keeps_every_node_maintenance_and_policy(cluster: Cluster, install: Install, nodes: Callable[..., list[str]]) -> None:
    install.apply(channel="candidate", startingCSV=csv_name("0.1.0"), installPlanApproval="Manual")
    install.approve("0.1.0")
    install.wait_plan_complete("0.1.0")
    install.wait_succeeded("0.1.0")
    # Each step's InstallPlan, noted as it completes: OLM keeps only the newest five of a namespace, and there are
    # more releases than that.
    steps = {tuple(plan["spec"]["clusterServiceVersionNames"]) for plan in install.plans()}

    created: dict[str, tuple[str, str, str]] = {}
    for index, node in enumerate(nodes(3, taints=TARGET_TAINTS)):
        name, reason = f"upgrade-{index}", f"kernel update {index}"
        apply(cluster, nm_manifest("v1alpha1", name, node, reason))
        created[name] = (nm_uid(cluster, "v1alpha1", name), node, reason)
    assert _all_readable(cluster, created, SERVED["0.1.0"])

    policy: OlderPolicy | None = None
    for previous, version in itertools.pairwise(RELEASES):
        install.approve(version)  # OLM offers the next release in turn, never a jump
        install.wait_plan_complete(version)
        steps |= {tuple(plan["spec"]["clusterServiceVersionNames"]) for plan in install.plans()}
        install.wait_succeeded(version, replacing=previous)
        assert served_versions(crd(cluster)) == SERVED[version]
        assert all(get(cluster, "crd", name) for name in CRDS[version]), f"{version} installs every CRD it owns: {CRDS[version]}"
        eventually(lambda: _all_readable(cluster, created, SERVED[version]), f"every NodeMaintenance readable after {version}")
        assert install.subscription()["status"]["installedCSV"] == csv_name(version)
        if policy is not None:
            policy.assert_unchanged(version)
        elif POLICY.crd_name in CRDS[version] and version != HEAD:
            policy = OlderPolicy(cluster, nodes)
    assert policy is not None, "a release before the head owns the NodeMaintenancePolicy CRD"
    policy.assert_governs()

    assert sorted(steps) == [(csv_name(version),) for version in RELEASES], steps
    stored = eventually(lambda: crd(cluster)["status"]["storedVersions"] == ["v1beta1"], "storedVersions == [v1beta1]")
    assert stored


def test_automatic_upgrade_skips_straight_to_the_head(cluster: Cluster, install: Install) -> None:
    install.apply(startingCSV=csv_name("0.1.0"))  # stable channel, automatic approval, as committed
    install.wait_plan_complete(HEAD)
    csv = install.wait_succeeded(HEAD, replacing="0.1.0")
    assert csv["spec"]["replaces"] == csv_name("0.1.0")
    installed = [name for plan in install.plans() for name in plan["spec"]["clusterServiceVersionNames"]]
    assert sorted(installed) == [csv_name("0.1.0"), csv_name(HEAD)], "every release between is skipped"
    # OLM resolves the head's plan as soon as 0.1.0's CSV exists, which can be before it records 0.1.0's plan
    # Complete. When that record loses a write conflict, OLM runs the plan's CRD step again after the head's
    # CRD is in place, refuses to roll it back (its stored-version check) and marks the plan Failed. Nothing of
    # 0.1.0 is left to install by then; any other failure of its plan is one.
    first = install.finished_plan_status("0.1.0")  # the refusal may still be on its way
    assert first.get("phase") == "Complete" or (
        first.get("phase") == "Failed" and "new CRD removes version v1beta1" in first.get("message", "")), first
    assert served_versions(crd(cluster)) == SERVED[HEAD]
