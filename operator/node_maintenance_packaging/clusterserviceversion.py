"""The ClusterServiceVersion of one release: the template plus what is computed from schemas and releases."""

from __future__ import annotations

import json
from typing import Any

from node_maintenance import api
from node_maintenance.coordination import remediation

from . import assets, yamlout
from .checks import check_related_images
from .imagerefs import ImageRefs
from .owned_crds import OwnedCrd
from .releases import Release, Releases
from .templating import Templates

DEPLOYMENT = "node-maintenance-operator"
NAMESPACE = "node-maintenance-operator"
WEBHOOK_PORT = 9443
HEALTH_PORT = 8081
METRICS_PORT = 8443  # with secure-metrics: /metrics over HTTPS (before, on the health port)
CSV_FILE = "node-maintenance-operator.clusterserviceversion.yaml"
# The objects each kind works on, listed in its owned-CRD entry; listing PodDisruptionBudget and Event
# also tells validators that the RBAC on them targets their v1 APIs, not the removed v1beta1 ones.
RELATED_KINDS = {
    api.NODE_MAINTENANCE.kind: (("Node", "v1"), ("Pod", "v1"), ("PodDisruptionBudget", "v1"), ("Event", "v1")),
    api.POLICY.kind: (("Node", "v1"), ("Job", "v1")),
}


def build_csv(templates: Templates, releases: Releases, images: ImageRefs, release: Release) -> dict[str, Any]:
    """Render the release's CSV and refuse it if it runs an image missing from relatedImages."""
    predecessor = releases.get(release.replaces) if release.replaces else None
    csv: dict[str, Any] = templates.yaml(
        "csv.yaml.j2",
        release=release,
        csv_name=releases.csv_name(release.version),
        replaces=releases.csv_name(predecessor.version) if predecessor else None,
        skips=[releases.csv_name(v) for v in release.skips],
        min_kube_version=releases.min_kube_version,
        namespace=NAMESPACE,
        deployment=DEPLOYMENT,
        service_account=api.SERVICE_ACCOUNT,
        webhook_port=WEBHOOK_PORT,
        health_port=HEALTH_PORT,
        metrics_port=METRICS_PORT,
        crd_name=api.CRD_NAME,
        owned_crd_names=[owned.resource.crd_name for owned in release.crds],
        policy_plural=api.POLICY.plural if release.owns_kind(api.POLICY.kind) else None,
        lease_namespace_env=remediation.LEASE_NAMESPACE_ENV,
        lease_namespace=remediation.DEFAULT_LEASE_NAMESPACE,
        operator_image=images.ref("operator", release),
        alm_examples=json.dumps(_examples(release), indent=2),
        platform_labels=_platforms(release) if release.has("listing") else None,
        namespace_template=json.dumps(templates.yaml("deploy/nm-ns.yaml.j2", namespace=NAMESPACE)) if release.has("listing") else None,
        description=_description(templates, release),
        icon=assets.icon_svg(),
        icon_mediatype=assets.ICON_MEDIATYPE,
        owned_crds=[_owned(owned.resource, version, release.version) for owned in release.crds for version in _listed(release, owned)],
        webhook_definitions=_webhooks(release),
        related_images=[{"name": role, "image": images.ref(role, release)} for role in release.related_images],
    )
    check_related_images(release, csv)
    return csv


def _platforms(release: Release) -> dict[str, str]:
    """The platform labels OperatorHub and OpenShift filter packages by: without them a package counts as linux/amd64 only."""
    return {"operatorframework.io/os.linux": "supported",
            **{f"operatorframework.io/arch.{architecture}": "supported" for architecture in release.architectures}}


def _examples(release: Release) -> list[dict[str, Any]]:
    return [
        {"apiVersion": f"{api.GROUP}/{version}", "kind": owned.resource.kind, **example}
        for owned in release.crds
        for version in _listed(release, owned)
        for example in owned.resource.examples(version, release.version)
    ]


def _listed(release: Release, owned: OwnedCrd) -> tuple[str, ...]:
    """The API versions a CRD's examples and owned entries list, in order: as served; with ``listing``, the stored one
    first and the others newest first, since the console shows the first example and the scorecard reads the first
    owned entry of a kind, which should be the version a user writes today, not a deprecated one."""
    if not release.has("listing"):
        return owned.served
    return (owned.storage, *reversed([version for version in owned.served if version != owned.storage]))


def _description(templates: Templates, release: Release) -> str:
    spec = api.load(release.storage)["example"]["spec"]
    policy = next((owned for owned in release.owns if owned.resource is api.POLICY), None)
    return templates.text(
        "description.md.j2",
        served=release.served,
        storage=release.storage,
        example_spec=yamlout.dump(spec).splitlines(),
        conversion=release.has("conversion"),
        validation=release.has("validation"),
        policy_version=policy.storage if policy else None,
        policy_spec=yamlout.dump(api.POLICY.examples(policy.storage, release.version)[0]["spec"]).splitlines() if policy else [],
    )


def _owned(resource: api.Resource, version: str, release: str) -> dict[str, Any]:
    schema = resource.load(version, release)["openAPIV3Schema"]
    properties = schema["properties"]
    return {
        "name": resource.crd_name,
        "version": version,
        "kind": resource.kind,
        "displayName": resource.display_name,
        "description": schema["description"],
        "resources": [{"kind": kind, "name": "", "version": v} for kind, v in RELATED_KINDS[resource.kind]],
        "specDescriptors": _descriptors(properties["spec"]),
        "statusDescriptors": _descriptors(properties["status"]),
    }


def _descriptors(node: dict[str, Any], prefix: str = "") -> list[dict[str, Any]]:
    """One descriptor per field carrying a csvDescriptor hint, depth first, in schema order."""
    found: list[dict[str, Any]] = []
    for name, child in node.get("properties", {}).items():
        path = f"{prefix}{name}"
        hint = child.get(api.DESCRIPTOR_HINT)
        if hint:
            found.append(
                {
                    "path": path,
                    "displayName": hint["displayName"],
                    "description": child["description"],
                    "x-descriptors": hint["x-descriptors"],
                }
            )
        found.extend(_descriptors(child, f"{path}."))
    return found


def _webhooks(release: Release) -> list[dict[str, Any]]:
    common = {
        "admissionReviewVersions": ["v1"],
        "containerPort": WEBHOOK_PORT,
        "targetPort": WEBHOOK_PORT,
        "deploymentName": DEPLOYMENT,
        "sideEffects": "None",
    }
    hooks: list[dict[str, Any]] = []
    if release.has("conversion"):
        hooks.append(
            {
                "type": "ConversionWebhook",
                "generateName": f"convert.{api.GROUP}",
                **common,
                "webhookPath": api.CONVERT_PATH,
                "conversionCRDs": [api.CRD_NAME],
            }
        )
    if release.has("validation"):
        hooks.append(
            {
                "type": "ValidatingAdmissionWebhook",
                "generateName": f"validate.{api.GROUP}",
                **common,
                "webhookPath": api.VALIDATE_PATH,
                "failurePolicy": "Fail",
                "timeoutSeconds": 10,
                **_judged(release, release.served, release.storage),
            }
        )
    policy = next((owned for owned in release.crds if owned.resource is api.POLICY), None)
    if release.has("validation") and policy:
        # Refuses a hook Job template that would run as the operator's ServiceAccount; status writes are not checked.
        hooks.append(
            {
                "type": "ValidatingAdmissionWebhook",
                "generateName": f"validate.{api.POLICY.plural}.{api.GROUP}",
                **common,
                "webhookPath": api.VALIDATE_POLICY_PATH,
                "failurePolicy": "Fail",
                "timeoutSeconds": 10,
                "rules": [
                    {
                        "apiGroups": [api.GROUP],
                        "apiVersions": list(policy.served),
                        "operations": ["CREATE", "UPDATE"],
                        "resources": [api.POLICY.plural],
                        "scope": "Cluster",
                    }
                ],
                **({"matchPolicy": "Equivalent"} if release.has("authorization") else {}),
            }
        )
    return hooks


def _judged(release: Release, served: tuple[str, ...], storage: str) -> dict[str, Any]:
    """What the NodeMaintenance webhook is sent: new objects; with authorization also updates (a changed spec asks
    again), in the storage version whatever version the request was made in (``Equivalent`` converts it), so that
    the object judged is the one stored."""
    if not release.has("authorization"):
        return {"rules": [{"apiGroups": [api.GROUP], "apiVersions": list(served), "operations": ["CREATE"],
                           "resources": [api.PLURAL], "scope": "Cluster"}]}
    return {"rules": [{"apiGroups": [api.GROUP], "apiVersions": [storage], "operations": ["CREATE", "UPDATE"],
                       "resources": [api.PLURAL], "scope": "Cluster"}], "matchPolicy": "Equivalent"}
