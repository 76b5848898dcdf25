"""Installing from our catalog as cluster admins do: from OperatorHub, whose install form subscribes to
the default channel with the values OLM's package server publishes (the same Subscription as the committed
deploy manifests), or by Subscription with the install modes and approval an admin picks; and the operator
OLM deployed draining a node."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from devcluster.cluster import Cluster
from devcluster.olm import NAMESPACE as OLM_NAMESPACE
from devcluster.olm import OLM, catalog_source
from node_maintenance.api import GROUP, KIND

from ....releases import HEAD, SERVED
from ...helpers import apply, delete_nm, deployment, eventually, get, nm_status, node, our_taint, pods_on
from .install import BUNDLE_CRD, Install, crd, csv_name, deploy_manifests, image_digests, olm_pods, served_versions
from .operatorhub import (
    bundle_crds,
    bundle_csv,
    bundle_icon,
    channel_heads,
    create,
    default_channel,
    example,
    icon,
    install_objects,
    package_manifest,
    storage_version,
    undescribed_status_fields,
)

pytestmark = pytest.mark.e2e


def test_fresh_install_from_operatorhub_drains_a_node(cluster: Cluster, olm: OLM, install: Install, nodes: Callable[..., list[str]]) -> None:
    # OperatorHub lists our package from our catalog, as the bundle describes it.
    olm.wait_package_listed()
    releases = install.published.inputs().releases
    manifest = package_manifest(cluster, olm, channel_heads(releases))
    status = manifest["status"]
    assert status["packageName"] == releases.package
    assert (status["catalogSource"], status["catalogSourceNamespace"]) == (olm.catalog_source, OLM_NAMESPACE)
    assert status["catalogSourceDisplayName"] == catalog_source(install.published.registry)["spec"]["displayName"]
    channel = default_channel(manifest)
    assert channel["name"] == releases.default_channel
    ours, shown = bundle_csv(), channel["currentCSVDesc"]
    assert channel["currentCSV"] == ours["metadata"]["name"] == csv_name(HEAD)
    assert shown["description"], "OperatorHub shows no description"
    for field in ("displayName", "description", "version", "installModes", "keywords", "maturity", "provider", "links", "maintainers"):
        assert shown.get(field) == ours["spec"][field], f"{field} differs from the bundle's"
    assert shown["annotations"]["alm-examples"] == ours["metadata"]["annotations"]["alm-examples"]
    # The package server lists the owned CRDs by name, kind, version and description (their descriptors come with the installed CSV).
    described = ("name", "version", "kind", "displayName", "description")
    assert shown["customresourcedefinitions"]["owned"] == [
        {key: owned[key] for key in described} for owned in ours["spec"]["customresourcedefinitions"]["owned"]]
    data, mediatype, etag = icon(cluster, olm, manifest)
    assert etag, "OperatorHub shows OLM's default icon: the package's CSV has none"
    assert (data, mediatype) == bundle_icon(ours)

    # Install as the form does, from those values alone: what the committed deploy manifests subscribe to too.
    cluster.ensure_namespace(install.namespace)
    group, subscription = install_objects(manifest, install.namespace)
    _, committed_group, committed_subscription = deploy_manifests(install.namespace)
    assert group["spec"] == committed_group["spec"]
    assert committed_subscription["spec"].items() <= subscription["spec"].items()
    create(cluster, [group, subscription])
    plan = install.wait_plan_complete(HEAD)
    assert plan["spec"]["approval"] == "Automatic"
    csv = install.wait_succeeded(HEAD)
    assert csv["status"]["reason"] == "InstallSucceeded"
    # OLM's catalog operator records the installed CSV in the Subscription's status in a sync of its own, which
    # may come after the CSV has succeeded.
    installed = eventually(lambda: (install.subscription().get("status") or {}).get("installedCSV"), "the Subscription naming its CSV")
    assert installed == csv_name(HEAD) == channel["currentCSV"]
    # The installed CSV, where the console reads descriptors from, describes every status field it stores.
    for owned_crd in bundle_crds():
        assert undescribed_status_fields(owned_crd, csv) == [], f"{owned_crd['metadata']['name']} status fields without a statusDescriptor"
    assert csv["spec"]["customresourcedefinitions"] == ours["spec"]["customresourcedefinitions"]

    # Every pod on this path runs an image nmo-pack pushed, or one built from OLM's and opm's pinned modules.
    published = install.published
    operator_pods = install.assert_operator_image(HEAD)
    # OLM applied the bundle's NetworkPolicy where it installed the operator, and it selects the operator's pods.
    policy = get(cluster, "networkpolicy", "node-maintenance-operator", "-n", install.namespace)
    assert policy is not None, "OLM did not create the bundle's NetworkPolicy"
    assert all(policy["spec"]["podSelector"]["matchLabels"].items() <= p["metadata"]["labels"].items() for p in operator_pods)
    pods = olm_pods(cluster)
    registry_images = [image_digests(p) for p in pods if "olm.catalogSource" in p["metadata"].get("labels", {})]
    started = [digests for digests in registry_images if digests]  # a catalog poll's new pod may still be pulling
    assert started and all(digests == {published.digest("catalog")} for digests in started), registry_images
    unpacked = set().union(*(image_digests(p) for p in pods if "job-name" in p["metadata"].get("labels", {})))
    tools = {published.opm_image.rsplit("@", 1)[1], published.util_image.rsplit("@", 1)[1]}
    assert unpacked >= {published.digest("bundle", HEAD), *tools}, "OLM unpacked our bundle image with its util and opm images"

    # The CRD is the one our bundle ships, every version served, conversion wired by OLM to our webhook.
    ours = yaml.safe_load(BUNDLE_CRD.read_text())
    installed = crd(cluster)
    assert served_versions(installed) == SERVED[HEAD]
    assert [v["name"] for v in installed["spec"]["versions"] if v["storage"]] == ["v1beta1"]
    for mine, theirs in zip(ours["spec"]["versions"], installed["spec"]["versions"], strict=True):
        assert mine["schema"] == theirs["schema"], f"schema of {mine['name']} differs from the bundle's"
    # OLM wires the webhook into the CRD from the CSV, which may happen just after the CSV reports Succeeded (and
    # an install step may apply the bundle's CRD once more meanwhile): judged from one read of the CRD.
    def wired() -> dict[str, Any] | None:
        read = crd(cluster)["spec"]["conversion"]
        return read if read["strategy"] == "Webhook" else None

    conversion = eventually(wired, "conversion webhook wired into the CRD")
    service = conversion["webhook"]["clientConfig"]["service"]
    assert service["namespace"] == install.namespace and service["path"] == "/convert"

    # The operator OLM deployed (our image, under the CSV's RBAC) drains a KWOK node end to end.
    target, spare = nodes(2)
    workload = f"{install.namespace}-app"
    cluster.kubectl("create", "namespace", workload)
    apply(cluster, deployment("web", workload, [target, spare], 2))
    eventually(lambda: len([p for p in pods_on(cluster, target) + pods_on(cluster, spare)
                            if p["status"].get("phase") == "Running"]) == 2, "2 web pods running")
    # A NodeMaintenance created as the console's form creates it: the CSV's example, its node filled in.
    maintenance = example(shown, KIND, f"{GROUP}/{storage_version(installed)['name']}")
    maintenance["spec"]["nodeName"] = target
    name = maintenance["metadata"]["name"]
    apply(cluster, maintenance)
    eventually(lambda: nm_status(cluster, name).get("phase") == "Succeeded", "maintenance Succeeded", timeout=90)
    target_node = node(cluster, target)
    assert target_node["spec"].get("unschedulable") is True and our_taint(target_node)
    assert [p for p in pods_on(cluster, target) if p["metadata"]["namespace"] == workload] == []
    eventually(lambda: len([p for p in pods_on(cluster, spare) if p["status"].get("phase") == "Running"]) == 2,
               "web pods rescheduled onto the spare node")
    operator_user = f"system:serviceaccount:{install.namespace}:node-maintenance-operator"
    # It ran under what OLM granted from the CSV, nothing more.
    for expected, request in (("no", ["*", "*"]), ("no", ["delete", "nodes"]), ("no", ["get", "secrets"]),
                              ("yes", ["create", "pods", "--subresource=eviction"])):
        answer = cluster.kubectl("auth", "can-i", *request, "--all-namespaces", f"--as={operator_user}", check=False)
        assert answer.stdout.strip() == expected, (request, answer.stdout)
    evictions = [e for e in cluster.audit_events(operator_user) if e.get("objectRef", {}).get("subresource") == "eviction"]
    assert len(evictions) >= 1, "the drain went through the Eviction API as the ServiceAccount OLM created"
    delete_nm(cluster, name)
    restored = node(cluster, target)
    assert not restored["spec"].get("unschedulable") and not our_taint(restored)
    cluster.kubectl("delete", "namespace", workload, "--wait=false")


@pytest.mark.parametrize("mode", ["OwnNamespace", "AllNamespaces"])
def test_operator_group_modes_install(cluster: Cluster, install: Install, mode: str) -> None:
    """0.1.0 supports both modes; later releases serve a conversion webhook, which OLM allows only in
    AllNamespaces mode, so OwnNamespace stays on 0.1.0 (the pending upgrade is left unapproved)."""
    targets = [install.namespace] if mode == "OwnNamespace" else None
    install.apply(target_namespaces=targets, startingCSV=csv_name("0.1.0"), installPlanApproval="Manual")
    install.approve("0.1.0")
    install.wait_plan_complete("0.1.0")
    csv = install.wait_succeeded("0.1.0")
    group = get(cluster, "operatorgroup", "node-maintenance-operator", "-n", install.namespace)
    assert group is not None
    expected = [install.namespace] if mode == "OwnNamespace" else [""]
    assert group["status"]["namespaces"] == expected
    annotations = csv["metadata"]["annotations"]
    assert annotations["olm.targetNamespaces"] == ("" if mode == "AllNamespaces" else install.namespace)
    assert served_versions(crd(cluster)) == SERVED["0.1.0"]
