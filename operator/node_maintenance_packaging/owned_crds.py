"""The CRDs a release declares in releases.yaml: the NodeMaintenance's versions and those of the kinds it owns
besides, each checked against the schemas this operator has, with the field's name and the fix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from node_maintenance import api

from . import yaml_fields
from .errors import release_error


@dataclass(frozen=True)
class OwnedCrd:
    """One CRD a release owns: the resource, the versions it serves and the one it stores."""

    resource: api.Resource
    served: tuple[str, ...]
    storage: str


def served_versions(raw: dict[str, Any], version: str, resource: api.Resource, field: str) -> tuple[str, ...]:
    """The versions served, each one this operator has a schema for: a CRD cannot serve a version without one."""
    parent = field.rpartition(".")[0]
    served = tuple(yaml_fields.string_list(raw, "served", f"release {version}: {parent}" if parent else f"release {version}"))
    for api_version in served:
        if api_version not in resource.versions:
            raise release_error(version, field, f"{api_version!r} has no {resource.kind} schema", f"use versions from {', '.join(resource.versions)}")
    if not served:
        raise release_error(version, field, "empty", "serve at least the storage version")
    return served


def parse(raw: dict[str, Any], version: str) -> tuple[OwnedCrd, ...]:
    """The CRDs a release owns besides the NodeMaintenance's (its ``owns``), by kind."""
    owns = raw.get("owns") or {}
    if not isinstance(owns, dict):
        raise release_error(version, "owns", f"expected a mapping of kind to versions, got {owns!r}", "write e.g. `NodeMaintenancePolicy: {served: [v1beta1], storage: v1beta1}`")
    owned = []
    for kind, declared in owns.items():
        field = f"owns.{kind}"
        try:
            resource = api.resource(kind)
        except KeyError:
            raise release_error(version, "owns", f"{kind!r} is not a kind of this operator", f"use one of {', '.join(r.kind for r in api.RESOURCES[1:])}") from None
        if resource is api.NODE_MAINTENANCE:
            raise release_error(version, field, "NodeMaintenance is declared by the release's served and storage", f"remove {field}")
        if not isinstance(declared, dict):
            raise release_error(version, field, f"expected a mapping, got {declared!r}", "write `{served: [v1beta1], storage: v1beta1}`")
        served = served_versions(declared, version, resource, f"{field}.served")
        owned.append(OwnedCrd(resource, served, storage_version(declared, version, served, f"{field}.storage")))
    return tuple(owned)


def storage_version(raw: dict[str, Any], version: str, served: tuple[str, ...], field: str = "storage") -> str:
    """The one version stored, which must be served: a CRD stores exactly one of the versions it serves."""
    storage = raw.get("storage")
    if isinstance(storage, list):
        if len(storage) != 1:
            raise release_error(
                version,
                field,
                f"lists {len(storage)} versions ({', '.join(map(str, storage))}) but a CRD stores exactly one",
                "keep only the version new objects are written in",
            )
        storage = storage[0]
    if not isinstance(storage, str):
        raise release_error(version, field, "missing", "name the one API version the CRD stores")
    if storage not in served:
        raise release_error(version, field, f"{storage} is not served", f"add it to served {list(served)} or store a served version")
    return storage
