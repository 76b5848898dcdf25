"""The NodeMaintenance CRD of one release, built from the per-version schema files."""

from __future__ import annotations

from typing import Any

from node_maintenance import api

from .releases import Release

CRD_FILE = f"{api.GROUP}_{api.PLURAL}.yaml"


def build_crd(release: Release) -> dict[str, Any]:
    """The CRD serving exactly the release's versions.

    Releases without a conversion webhook say ``strategy: None``; for the others OLM injects the
    webhook (declared in the CSV's webhookdefinitions), so the file stays appliable with kubectl.
    """
    spec: dict[str, Any] = {
        "group": api.GROUP,
        "names": {
            "kind": api.KIND,
            "listKind": api.LIST_KIND,
            "plural": api.PLURAL,
            "singular": api.SINGULAR,
            "shortNames": list(api.SHORT_NAMES),
        },
        "scope": "Cluster",
        "versions": [_version(release, name) for name in release.served],
    }
    if not release.has("conversion"):
        spec["conversion"] = {"strategy": "None"}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": api.CRD_NAME},
        "spec": spec,
    }


def _version(release: Release, name: str) -> dict[str, Any]:
    document = api.load(name)
    entry: dict[str, Any] = {"name": name, "served": True, "storage": name == release.storage}
    deprecation = document.get("deprecation")
    # A version is only announced as deprecated once the release serves its replacement.
    if deprecation and deprecation["replacedBy"] in release.served:
        entry["deprecated"] = True
        entry["deprecationWarning"] = deprecation["warning"]
    entry["schema"] = {"openAPIV3Schema": api.openapi_schema(name)}
    entry["subresources"] = {"status": {}}
    entry["additionalPrinterColumns"] = document["printerColumns"]
    if document.get("selectableFields"):
        entry["selectableFields"] = document["selectableFields"]
    return entry
