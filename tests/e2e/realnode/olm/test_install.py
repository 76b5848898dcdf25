"""Installing from our catalog by Subscription, as cluster admins do: the committed deploy manifests,
OLM resolving the default channel, and the operator OLM deployed draining a node."""

from __future__ import annotations

import pytest
import yaml

from devcluster.cluster import Cluster

from ....releases import HEAD, SERVED
from ...helpers import apply, create_nm, delete_nm, deployment, eventually, get, nm_status, node, our_taint, pods_on
from .install import BUNDLE_CRD, Install, crd, csv_name, image_digests, olm_pods, served_versions

pytestmark = pytest.mark.e2e


def test_fresh_install_on_default_channel_drains_a_node(cluster: Cluster, install: Install, nodes) -> None:
    install.apply()  # nm-sub.yaml as committed: default channel, automatic approval
    plan = install.wait_plan_complete(HEAD)
    assert plan["spec"]["approval"] == "Automatic"
    csv = install.wait_succeeded(HEAD)
    assert csv["status"]["reason"] == "InstallSucceeded"
    assert install.subscription()["status"]["installedCSV"] == csv_name(HEAD)

    # Every pod on this path runs an image nmo-pack pushed, or one built from OLM's and opm's pinned modules.
    published = install.published
    install.assert_operator_image(HEAD)
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
    # OLM wires the webhook into the CRD from the CSV, which may happen just after the CSV reports Succeeded.
    conversion = eventually(lambda: crd(cluster)["spec"]["conversion"] if crd(cluster)["spec"]["conversion"]["strategy"] == "Webhook" else None,
                            "conversion webhook wired into the CRD")
    service = conversion["webhook"]["clientConfig"]["service"]
    assert service["namespace"] == install.namespace and service["path"] == "/convert"

    # The operator OLM deployed (our image, under the CSV's RBAC) drains a KWOK node end to end.
    target, spare = nodes(2)
    workload = f"{install.namespace}-app"
    cluster.kubectl("create", "namespace", workload)
    apply(cluster, deployment("web", workload, [target, spare], 2))
    eventually(lambda: len([p for p in pods_on(cluster, target) + pods_on(cluster, spare)
                            if p["status"].get("phase") == "Running"]) == 2, "2 web pods running")
    name = f"nm-{target}"
    create_nm(cluster, name, target)
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
