"""Upgrades along our channels: step by step with manual approval (candidate), and straight to the head
through olm.skipRange with automatic approval (stable). No NodeMaintenance is lost on the way."""

from __future__ import annotations

import itertools

import pytest

from devcluster.cluster import Cluster

from ....releases import CRDS, HEAD, RELEASES, SERVED
from ...helpers import apply, eventually, get
from .install import Install, crd, csv_name, nm_manifest, read_nm, served_versions

pytestmark = pytest.mark.e2e


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


def test_manual_upgrade_through_every_release_keeps_every_node_maintenance(cluster: Cluster, install: Install, nodes) -> None:
    install.apply(channel="candidate", startingCSV=csv_name("0.1.0"), installPlanApproval="Manual")
    install.approve("0.1.0")
    install.wait_plan_complete("0.1.0")
    install.wait_succeeded("0.1.0")

    created: dict[str, tuple[str, str, str]] = {}
    # Tainted, so that no rolling operator pod lands on a node its maintenance drains.
    for index, node in enumerate(nodes(3, taints=[{"key": "e2e/maintenance-target", "effect": "NoSchedule"}])):
        name, reason = f"upgrade-{index}", f"kernel update {index}"
        apply(cluster, nm_manifest("v1alpha1", name, node, reason))
        created[name] = (read_nm(cluster, "v1alpha1", name)["metadata"]["uid"], node, reason)
    assert _all_readable(cluster, created, SERVED["0.1.0"])

    for previous, version in itertools.pairwise(RELEASES):
        install.approve(version)  # OLM offers the next release in turn, never a jump
        install.wait_plan_complete(version)
        install.wait_succeeded(version)
        assert served_versions(crd(cluster)) == SERVED[version]
        assert all(get(cluster, "crd", name) for name in CRDS[version]), f"{version} installs every CRD it owns: {CRDS[version]}"
        eventually(lambda: _all_readable(cluster, created, SERVED[version]), f"every NodeMaintenance readable after {version}")
        eventually(lambda: install.csv(previous) is None, f"{previous}'s CSV replaced")
        assert install.subscription()["status"]["installedCSV"] == csv_name(version)

    steps = sorted(tuple(plan["spec"]["clusterServiceVersionNames"]) for plan in install.plans())
    assert sorted(set(steps)) == [(csv_name(version),) for version in RELEASES], steps
    stored = eventually(lambda: crd(cluster)["status"]["storedVersions"] == ["v1beta1"], "storedVersions == [v1beta1]")
    assert stored


def test_automatic_upgrade_skips_straight_to_the_head(cluster: Cluster, install: Install) -> None:
    install.apply(startingCSV=csv_name("0.1.0"))  # stable channel, automatic approval, as committed
    install.wait_plan_complete(HEAD)
    csv = install.wait_succeeded(HEAD)
    assert csv["spec"]["replaces"] == csv_name("0.1.0")
    eventually(lambda: install.csv("0.1.0") is None, "0.1.0's CSV replaced")
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
