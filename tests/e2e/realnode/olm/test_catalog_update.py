"""Catalog updates as a publisher ships them: a new catalog image under the same tag, which OLM's registry
poll finds. A release added to it upgrades Subscriptions by themselves, while a drain goes on and every
PodDisruptionBudget holds; a release that cannot install is refused, and the installed one keeps working."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from devcluster.cluster import Cluster
from devcluster.olm import INSTALL_PLAN_RETRY_SECONDS, OLM, catalog_source
from devcluster.olm import NAMESPACE as OLM_NAMESPACE
from devcluster.publish import Published, pinned
from node_maintenance.api import GROUP
from node_maintenance_packaging.render import Inputs

from ....releases import HEAD, RELEASES, SERVED
from ...helpers import apply, deployment, eventually, node, our_taint, pdb, pods_on
from .budgets import BudgetWatch
from .install import Install, crd, csv_name, nm_manifest, nm_uid, read_nm, served_versions

pytestmark = pytest.mark.e2e
# The rendered CatalogSource polls its image every 30m; these tests shorten that to this.
POLL = "10s"
PREVIOUS = RELEASES[1]  # what the first catalog image offers last
NEXT = RELEASES[2]  # the release after it, which the broken catalog's head pretends to be


class Catalog:
    """The image behind the CatalogSource's tag, replaced the way a publisher replaces it."""

    def __init__(self, cluster: Cluster, olm: OLM, published: Published) -> None:
        self.cluster, self.olm, self.published = cluster, olm, published

    def serve(self, inputs: Inputs) -> str:
        """Push the catalog of ``inputs`` under the tag and wait until OLM's registry poll serves it."""
        digest = self.wait_served(self.published.push_catalog(inputs))
        self.wait_listed(inputs.releases.current.version)
        return digest

    def wait_listed(self, head: str) -> None:
        """Wait until OperatorHub's listing, which reads the catalog through its registry Service as OLM's resolver
        does, shows ``head`` as the newest release: the new registry pod runs and is Ready a moment before the
        Service leads to it, and a Subscription made meanwhile resolves against the catalog before."""
        eventually(lambda: self.listed_head() == csv_name(head), f"OperatorHub listing {csv_name(head)} as the catalog's head",
                   timeout=120, interval=1)

    def listed_head(self) -> str | None:
        """The default channel's newest CSV as the PackageManifest API lists it; None while it does not answer."""
        out = self.cluster.kubectl("get", "packagemanifest", self.olm.package, "-n", OLM_NAMESPACE, "-o", "json", check=False)
        if out.returncode:
            return None
        status = json.loads(out.stdout).get("status") or {}
        return next((c.get("currentCSV") for c in status.get("channels") or [] if c.get("name") == status.get("defaultChannel")), None)

    def wait_served(self, digest: str) -> str:
        eventually(lambda: self.olm.serving(digest), f"the registry poll serving catalog image {digest[:19]}", timeout=150, interval=1)
        return digest

    def poll_every(self, interval: str) -> None:
        patch = {"spec": {"updateStrategy": {"registryPoll": {"interval": interval}}}}
        self.cluster.kubectl("patch", "catalogsource", self.olm.catalog_source, "-n", OLM_NAMESPACE, "--type=merge", "-p", json.dumps(patch))


@pytest.fixture
def catalog(cluster: Cluster, olm: OLM, published: Published) -> Iterator[Catalog]:
    """Polled every POLL for the test; then serving the catalog first published again, polled as rendered.
    Tests take it before ``install``, so their install is gone before the catalog changes back."""
    catalog = Catalog(cluster, olm, published)
    catalog.poll_every(POLL)
    yield catalog
    published.restore_catalog()
    catalog.wait_served(published.digest("catalog"))
    catalog.wait_listed(HEAD)
    rendered = catalog_source(published.registry)["spec"]["updateStrategy"]["registryPoll"]["interval"]
    catalog.poll_every(rendered)


def broken(published: Published, version: str) -> Inputs:
    """The catalog up to ``version``, whose ``version`` no longer serves the API version the release it
    replaces stores: installing it would lose every object stored in that version, which OLM refuses."""
    releases = published.inputs(through=version).releases
    release = releases.get(version)
    assert release.replaces is not None
    dropped = releases.get(release.replaces).storage
    bad = dataclasses.replace(release, served=tuple(v for v in release.served if v != dropped))
    assert bad.storage != dropped, "the broken release must still store a version it serves"
    releases = dataclasses.replace(releases, releases=tuple(bad if r.version == version else r for r in releases.releases))
    pins = published.pins
    inputs = pinned(releases, pins)
    pins[inputs.images.tagged("bundle", bad)] = published.push_bundle(inputs, version)
    return pinned(releases, pins)


def _phase(cluster: Cluster, name: str, version: str) -> str | None:
    return ((read_nm(cluster, version, name) or {}).get("status") or {}).get("phase")


def test_a_release_added_to_the_catalog_upgrades_the_subscription_by_itself(
        cluster: Cluster, catalog: Catalog, install: Install, published: Published, nodes: Callable[..., list[str]]) -> None:
    catalog.serve(published.inputs(through=PREVIOUS))
    install.apply(startingCSV=csv_name(PREVIOUS))  # stable channel, automatic approval, as committed
    install.wait_plan_complete(PREVIOUS)
    install.wait_succeeded(PREVIOUS)
    install.assert_operator_image(PREVIOUS)

    # A drain that is still running when the upgrade comes: two pods move at once, three are held by a
    # budget that allows no disruption until the test relaxes it.
    target, spare = nodes(2)
    workload = f"{install.namespace}-app"
    cluster.kubectl("create", "namespace", workload)
    cluster.kubectl("cordon", spare)
    apply(cluster, deployment("free", workload, [target, spare], 2), deployment("held", workload, [target, spare], 3),
          pdb("held", workload, {"app": "held"}, minAvailable=3))
    eventually(lambda: len([p for p in pods_on(cluster, target) if p["status"].get("phase") == "Running"]) == 5, "5 pods on the target")
    cluster.kubectl("uncordon", spare)
    budgets = BudgetWatch(cluster, workload)
    try:
        name = f"nm-{target}"
        apply(cluster, nm_manifest("v1alpha1", name, target, "upgrade during a drain"))
        uid = nm_uid(cluster, "v1alpha1", name)

        def held_back() -> bool:
            labels = [p["metadata"]["labels"].get("app") for p in pods_on(cluster, target) if p["metadata"]["namespace"] == workload]
            return sorted(labels) == ["held"] * 3

        eventually(held_back, "the free pods evicted, the held ones kept by their budget")
        assert _phase(cluster, name, "v1alpha1") == "Running"

        # The publisher adds the next releases to the catalog, under the same tag.
        published.restore_catalog()
        catalog.wait_served(published.digest("catalog"))
        install.wait_plan_complete(HEAD, timeout=300)
        install.wait_succeeded(HEAD, replacing=PREVIOUS)
        install.assert_operator_image(HEAD)
        assert install.subscription()["status"]["installedCSV"] == csv_name(HEAD)
        assert served_versions(crd(cluster)) == SERVED[HEAD]

        # The same maintenance, still draining under the new operator, finishes once the budget allows.
        # OLM wires the conversion webhook into the new CRD just after the CSV succeeds.
        eventually(lambda: all((read_nm(cluster, v, name) or {}).get("metadata", {}).get("uid") == uid for v in SERVED[HEAD]),
                   f"the maintenance readable in {', '.join(SERVED[HEAD])}")
        assert held_back()
        eventually(lambda: _phase(cluster, name, "v1beta1") == "Running", "the maintenance still Running under the new operator")
        cluster.kubectl("patch", "pdb", "held", "-n", workload, "--type=merge", "-p", '{"spec":{"minAvailable":null,"maxUnavailable":1}}')
        eventually(lambda: _phase(cluster, name, "v1beta1") == "Succeeded", "the drain Succeeded after the upgrade", timeout=90)
        assert [p for p in pods_on(cluster, target) if p["metadata"]["namespace"] == workload] == []
        held = node(cluster, target)
        assert held["spec"].get("unschedulable") is True and our_taint(held)
    finally:
        budgets.stop()
    assert budgets.events > 0, "the budget watch saw nothing"
    assert budgets.violations == [], budgets.violations
    cluster.kubectl("delete", "namespace", workload, "--wait=false")


def test_a_release_that_cannot_install_is_refused_and_the_installed_one_keeps_working(
        cluster: Cluster, catalog: Catalog, install: Install, published: Published, nodes: Callable[..., list[str]]) -> None:
    catalog.serve(published.inputs(through=PREVIOUS))
    install.apply(startingCSV=csv_name(PREVIOUS))
    install.wait_plan_complete(PREVIOUS)
    install.wait_succeeded(PREVIOUS)
    kept_node, later_node = nodes(2)
    apply(cluster, nm_manifest("v1alpha1", "kept", kept_node, "before the broken release"))
    eventually(lambda: _phase(cluster, "kept", "v1alpha1") == "Succeeded", "the first maintenance Succeeded")
    uid = nm_uid(cluster, "v1alpha1", "kept")

    catalog.serve(broken(published, NEXT))

    def failed_plan() -> dict[str, Any] | None:
        plans = [p for p in install.plans() if csv_name(NEXT) in p["spec"]["clusterServiceVersionNames"]]
        return next((p for p in plans if (p.get("status") or {}).get("phase") == "Failed"), None)

    # OLM polls the catalog, then retries the failing InstallPlan for INSTALL_PLAN_RETRY_SECONDS before it fails it.
    plan = eventually(failed_plan, f"the InstallPlan for {csv_name(NEXT)} Failed", timeout=INSTALL_PLAN_RETRY_SECONDS + 270, interval=2)
    why = " ".join(c.get("message", "") for c in plan["status"].get("conditions", []))
    assert "risk of data loss" in why, plan["status"]
    condition = eventually(lambda: next((c for c in install.subscription()["status"].get("conditions", [])
                                         if c["type"] == "InstallPlanFailed" and c["status"] == "True"), None),
                           "the Subscription reporting the failed InstallPlan")
    assert "risk of data loss" in condition.get("message", ""), condition

    # Nothing of the broken release took hold: its CSV waits for a CRD that never came, and OLM keeps the
    # installed release (Replacing until a replacement succeeds) running from its own image, doing its job.
    refused = install.csv(NEXT)
    assert refused is None or refused["status"]["phase"] != "Succeeded", refused["status"]
    previous = install.csv(PREVIOUS)
    assert previous is not None and previous["status"]["phase"] in ("Succeeded", "Replacing")
    install.assert_operator_image(PREVIOUS)
    assert served_versions(crd(cluster)) == SERVED[PREVIOUS]
    for version in SERVED[PREVIOUS]:
        assert nm_uid(cluster, version, "kept") == uid
    apply(cluster, nm_manifest("v1alpha1", "later", later_node, "after the broken release"))
    eventually(lambda: _phase(cluster, "later", "v1alpha1") == "Succeeded", "a new maintenance Succeeded")
    for name, target in (("kept", kept_node), ("later", later_node)):
        cluster.kubectl("delete", f"nodemaintenances.v1alpha1.{GROUP}", name, "--timeout=60s")
        assert not node(cluster, target)["spec"].get("unschedulable"), f"{target} handed back"
