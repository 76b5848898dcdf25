"""OperatorHub's view of our package, as the console reads it: the PackageManifest OLM's package server
serves (channels, install modes, what the current CSV says of itself), the package's icon, and the
OperatorGroup and Subscription the console's install form creates from those values alone."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from http import HTTPStatus
from typing import Any, cast

import yaml

from devcluster.cluster import Cluster
from devcluster.olm import NAMESPACE as OLM_NAMESPACE
from devcluster.olm import OLM
from node_maintenance_packaging.clusterserviceversion import CSV_FILE
from node_maintenance_packaging.releases import Releases

from ...helpers import eventually, get
from .install import ROOT

BUNDLE_MANIFESTS = ROOT / "bundle" / "manifests"
OPERATOR_GROUP_API = "operators.coreos.com/v1"
SUBSCRIPTION_API = "operators.coreos.com/v1alpha1"
# The console's install form, left at its defaults: every namespace when the operator supports it, and updates approved by OLM.
ALL_NAMESPACES = "AllNamespaces"
OWN_NAMESPACE = "OwnNamespace"
APPROVAL = "Automatic"


def bundle_csv() -> dict[str, Any]:
    """The current release's CSV as the committed bundle holds it."""
    return cast(dict[str, Any], yaml.safe_load((BUNDLE_MANIFESTS / CSV_FILE).read_text()))


def bundle_crds() -> list[dict[str, Any]]:
    """The CRDs the committed bundle ships."""
    objects = [yaml.safe_load(path.read_text()) for path in sorted(BUNDLE_MANIFESTS.glob("*.yaml"))]
    return [obj for obj in objects if obj["kind"] == "CustomResourceDefinition"]


def channel_heads(releases: Releases) -> dict[str, str]:
    """The CSV each channel installs: its newest release's."""
    return {
        channel: releases.csv_name(max((r for r in releases.releases if channel in r.channels), key=lambda r: r.semver).version)
        for channel in releases.channels
    }


def package_manifest(cluster: Cluster, olm: OLM, heads: dict[str, str]) -> dict[str, Any]:
    """Our package among those OperatorHub lists (the PackageManifests of OLM's global catalog namespace), once
    it lists the channel ``heads`` the catalog image holds. Each request is answered by one of the package
    server's replicas, and each syncs the catalog on its own: one may not list it yet, or still list a catalog
    image a test has since replaced."""
    seen: dict[str, Any] = {}

    def current() -> dict[str, Any] | None:
        listed = get(cluster, "packagemanifests", "-n", OLM_NAMESPACE) or {"items": []}
        ours = [p for p in listed["items"] if p["metadata"]["name"] == olm.package]
        seen["listed"] = [p["metadata"]["name"] for p in listed["items"]]
        seen["heads"] = {c["name"]: c["currentCSV"] for p in ours for c in p["status"]["channels"]}
        return ours[0] if len(ours) == 1 and seen["heads"] == heads else None

    try:
        return eventually(current, f"OperatorHub listing {olm.package} with the channel heads {heads}", timeout=120)
    except AssertionError as error:
        raise AssertionError(f"{error}; it lists {seen.get('listed')}, ours with the heads {seen.get('heads')}") from None


def default_channel(manifest: dict[str, Any]) -> dict[str, Any]:
    """The channel the install form preselects: the package's default channel."""
    name = manifest["status"].get("defaultChannel")
    assert name, "the package has no default channel: OperatorHub cannot preselect one"
    (channel,) = [c for c in manifest["status"]["channels"] if c["name"] == name]
    return cast(dict[str, Any], channel)


def icon(cluster: Cluster, olm: OLM, manifest: dict[str, Any]) -> tuple[bytes, str, str]:
    """The icon OperatorHub shows for the package, from the PackageManifest's icon subresource (the package
    server strips icons from the objects themselves): its bytes, media type and ETag. For a package whose
    CSV has no icon, OLM answers with its own default icon and an empty ETag."""
    group, version = olm.packages_api
    metadata = manifest["metadata"]
    path = f"/apis/{group}/{version}/namespaces/{metadata['namespace']}/packagemanifests/{metadata['name']}/icon"
    request = urllib.request.Request(cluster.server + path, headers={"Authorization": f"Bearer {cluster.admin_token}"})
    context = ssl.create_default_context(cafile=str(cluster.ca_file))

    def fetch() -> tuple[bytes, str, str] | None:
        try:
            with urllib.request.urlopen(request, context=context, timeout=30) as response:
                return response.read(), response.headers.get("Content-Type", ""), response.headers.get("ETag", "")
        except urllib.error.HTTPError as error:
            if error.code == HTTPStatus.NOT_FOUND:  # a replica of the package server that has not synced the catalog yet
                return None
            raise

    return eventually(fetch, f"the icon of {metadata['name']}")


def bundle_icon(csv: dict[str, Any]) -> tuple[bytes, str]:
    """The first icon of a CSV, the one OperatorHub shows: its bytes and media type."""
    icons = csv["spec"].get("icon") or []
    assert icons, f"CSV {csv['metadata']['name']} has no icon"
    return base64.b64decode(icons[0]["base64data"]), icons[0]["mediatype"]


def example(csv_description: dict[str, Any], kind: str, api_version: str) -> dict[str, Any]:
    """The object the console's create form starts from: the CSV's first alm-examples entry for ``kind`` at
    ``api_version`` (the console offers the further ones as samples)."""
    examples = json.loads(csv_description["annotations"]["alm-examples"])
    found = [e for e in examples if e["kind"] == kind and e["apiVersion"] == api_version]
    assert found, f"alm-examples has no {kind} example at {api_version}"
    return cast(dict[str, Any], found[0])


def storage_version(crd: dict[str, Any]) -> dict[str, Any]:
    """The version of ``crd`` the API server stores objects in."""
    (stored,) = [v for v in crd["spec"]["versions"] if v["storage"]]
    return cast(dict[str, Any], stored)


def undescribed_status_fields(crd: dict[str, Any], csv: dict[str, Any]) -> list[str]:
    """The status fields of ``crd``'s storage version that the CSV's owned-CRD entry for that version has no
    statusDescriptor for: what the console's details page of an object would leave out."""
    stored = storage_version(crd)
    entries = [o for o in csv["spec"]["customresourcedefinitions"]["owned"]
               if o["name"] == crd["metadata"]["name"] and o["version"] == stored["name"]]
    assert len(entries) == 1, f"the CSV describes {crd['metadata']['name']} {stored['name']} {len(entries)} times"
    described = {d["path"] for d in entries[0].get("statusDescriptors") or []}
    fields = stored["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    return [name for name in fields if name not in described]


def install_objects(manifest: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    """What the install form creates in ``namespace`` with its defaults, from the PackageManifest alone: an
    OperatorGroup for the install mode the package supports (every namespace if it can, else its own), and a
    Subscription to the default channel's current CSV from the package's catalog."""
    status = manifest["status"]
    channel = default_channel(manifest)
    supported = {m["type"] for m in channel["currentCSVDesc"]["installModes"] if m["supported"]}
    assert supported & {ALL_NAMESPACES, OWN_NAMESPACE}, f"the install form offers none of {sorted(supported)}"
    group = {
        "apiVersion": OPERATOR_GROUP_API,
        "kind": "OperatorGroup",
        "metadata": {"generateName": f"{namespace}-", "namespace": namespace},
        "spec": {} if ALL_NAMESPACES in supported else {"targetNamespaces": [namespace]},
    }
    subscription = {
        "apiVersion": SUBSCRIPTION_API,
        "kind": "Subscription",
        "metadata": {"name": status["packageName"], "namespace": namespace},
        "spec": {
            "channel": channel["name"],
            "installPlanApproval": APPROVAL,
            "name": status["packageName"],
            "source": status["catalogSource"],
            "sourceNamespace": status["catalogSourceNamespace"],
            "startingCSV": channel["currentCSV"],
        },
    }
    return [group, subscription]


def create(cluster: Cluster, objects: list[dict[str, Any]]) -> None:
    """Create ``objects`` as the console does (POST, so generateName names the OperatorGroup)."""
    cluster.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
