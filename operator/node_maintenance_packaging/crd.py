"""The CRDs of one release, built from the per-version schema files of each resource it owns."""

from __future__ import annotations

from typing import Any

from node_maintenance import api

from .owned_crds import OwnedCrd
from .releases import Release


def crd_file(resource: api.Resource) -> str:
    return f"{api.GROUP}_{resource.plural}.yaml"


CRD_FILE = crd_file(api.NODE_MAINTENANCE)


def build_crds(release: Release) -> dict[str, dict[str, Any]]:
    """Every CRD the release owns, by bundle file name, the NodeMaintenance's first."""
    return {crd_file(owned.resource): build_crd(release, owned) for owned in release.crds}


def build_crd(release: Release, owned: OwnedCrd | None = None) -> dict[str, Any]:
    """The CRD serving exactly the versions the release declares for it (the NodeMaintenance's by default).

    The NodeMaintenance CRD of a release without a conversion webhook says ``strategy: None``, as does
    every CRD with a single version; for the others OLM injects the webhook (declared in the CSV's
    webhookdefinitions), so the file stays appliable with kubectl.
    """
    owned = owned or release.crds[0]
    resource = owned.resource
    spec: dict[str, Any] = {
        "group": api.GROUP,
        "names": {
            "kind": resource.kind,
            "listKind": resource.list_kind,
            "plural": resource.plural,
            "singular": resource.singular,
            "shortNames": list(resource.short_names),
        },
        "scope": "Cluster",
        "versions": [_version(owned, name, release.version) for name in owned.served],
    }
    if not (resource is api.NODE_MAINTENANCE and release.has("conversion")):
        spec["conversion"] = {"strategy": "None"}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": resource.crd_name},
        "spec": spec,
    }


def _version(owned: OwnedCrd, name: str, release: str) -> dict[str, Any]:
    document = owned.resource.load(name, release)
    entry: dict[str, Any] = {"name": name, "served": True, "storage": name == owned.storage}
    deprecation = document.get("deprecation")
    # A version is only announced as deprecated once the release serves its replacement.
    if deprecation and deprecation["replacedBy"] in owned.served:
        entry["deprecated"] = True
        entry["deprecationWarning"] = deprecation["warning"]
    entry["schema"] = {"openAPIV3Schema": owned.resource.openapi_schema(name, release)}
    entry["subresources"] = {"status": {}}
    entry["additionalPrinterColumns"] = document["printerColumns"]
    if document.get("selectableFields"):
        entry["selectableFields"] = document["selectableFields"]
    return entry
