"""The operator's APIs: names shared by the runtime and the packaging, and each version's schema.

Each resource's schemas live in ``schemas/`` (NodeMaintenance at the top, other kinds in a directory
named after their plural), one file per version: the single source the CRDs, the CSV descriptors and
the API reference are rendered from. Schemas carry ``csvDescriptor`` hints for the
ClusterServiceVersion, which :meth:`Resource.openapi_schema` removes so the CRD gets a plain schema.

A property added to a version after its first release says so with a ``since`` hint (a release's
version): what is rendered for an earlier release leaves it out, so a release once shipped keeps its CRD.
Each version has one ``example``; ``examples`` adds more, each with its ``since``, for the CSV and the docs.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

GROUP = "nodemaintenance.kubevirt.io"
# The version every other converts through, and the one the CRD stores from 0.3.0 on.
HUB = "v1beta1"
DESCRIPTOR_HINT = "csvDescriptor"
SINCE_HINT = "since"
# The ServiceAccount the operator runs as (the CSV's install strategy names it): its rights are cluster-wide,
# so no policy's hook Job may run as it.
SERVICE_ACCOUNT = "node-maintenance-operator"
# Where the operator serves its webhooks, which the CSV's webhookdefinitions name.
CONVERT_PATH = "/convert"
VALIDATE_PATH = "/validate-nodemaintenance"
VALIDATE_POLICY_PATH = "/validate-nodemaintenancepolicy"


@dataclass(frozen=True)
class Resource:
    """One custom resource of the group: its names and the versions it has schemas for."""

    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    versions: tuple[str, ...]
    display_name: str
    schema_dir: str = ""  # under schemas/; empty for NodeMaintenance, whose schemas predate other kinds

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{GROUP}"

    def load(self, version: str, release: str | None = None) -> dict[str, Any]:
        """The whole schema document of one version (a copy, so callers may change it), hints kept; with
        ``release``, as that release ships it: without the properties added after it."""
        document = copy.deepcopy(self._document(version))
        if release is not None:
            document["openAPIV3Schema"] = _as_of(document["openAPIV3Schema"], _release_key(release))
        return document

    def openapi_schema(self, version: str, release: str | None = None) -> dict[str, Any]:
        """The version's openAPIV3Schema exactly as the CRD declares it (in ``release``, when given: the
        newest otherwise), without hints."""
        return _without_hints(self.load(version, release)["openAPIV3Schema"])

    def examples(self, version: str, release: str | None = None) -> list[dict[str, Any]]:
        """The version's example objects (metadata and spec): its first example, then those added since, up
        to ``release`` when given; in ``release``, the first without the fields added later (a field a release requires
        of new objects belongs in the example from that release on)."""
        document = self.load(version, release)
        extra = [example for example in document.get("examples", [])
                 if release is None or _release_key(str(example[SINCE_HINT])) <= _release_key(release)]
        first = document["example"]
        if release is not None:
            first = {**first, "spec": _declared(first["spec"], document["openAPIV3Schema"]["properties"]["spec"])}
        return [first, *({k: v for k, v in example.items() if k != SINCE_HINT} for example in extra)]

    def since_hints(self, version: str) -> list[tuple[str, str]]:
        """(where, release) for every ``since`` hint of the version: its properties' paths (``spec.windows``,
        ``spec.topologyLimits[].maxParallel``) and its added examples (``examples[0]``)."""
        document = self._document(version)
        found = _since_hints(document["openAPIV3Schema"], "")
        found += [(f"examples[{index}]", str(example.get(SINCE_HINT))) for index, example in enumerate(document.get("examples", []))]
        return found

    def schema_file(self, version: str) -> str:
        """The version's schema file, as its maintainers find it in the package."""
        return "/".join(("schemas", *([self.schema_dir] if self.schema_dir else []), f"{version}.yaml"))

    def _document(self, version: str) -> dict[str, Any]:
        if version not in self.versions:
            raise KeyError(f"unknown {self.kind} API version {version!r}; known: {', '.join(self.versions)}")
        return read_schema(self.schema_dir, version)


NODE_MAINTENANCE = Resource(
    kind="NodeMaintenance", plural="nodemaintenances", singular="nodemaintenance", short_names=("nm",),
    versions=("v1alpha1", "v1alpha3", "v1beta1"), display_name="Node Maintenance",
)
POLICY = Resource(
    kind="NodeMaintenancePolicy", plural="nodemaintenancepolicies", singular="nodemaintenancepolicy", short_names=("nmp",),
    versions=("v1beta1",), display_name="Node Maintenance Policy", schema_dir="nodemaintenancepolicies",
)
RESOURCES = (NODE_MAINTENANCE, POLICY)

# The NodeMaintenance's names, which most of the code speaks of.
KIND = NODE_MAINTENANCE.kind
PLURAL = NODE_MAINTENANCE.plural
CRD_NAME = NODE_MAINTENANCE.crd_name
VERSIONS = NODE_MAINTENANCE.versions
load = NODE_MAINTENANCE.load
openapi_schema = NODE_MAINTENANCE.openapi_schema


def resource(kind: str) -> Resource:
    for candidate in RESOURCES:
        if candidate.kind == kind:
            return candidate
    raise KeyError(f"unknown kind {kind!r}; known: {', '.join(r.kind for r in RESOURCES)}")


@cache
def read_schema(schema_dir: str, version: str) -> dict[str, Any]:
    """One schema document as shipped in the package (``schema_dir``: a resource's folder, empty for the NodeMaintenance),
    read once: every webhook review and every render asks for it."""
    folder = resources.files(__package__).joinpath("schemas")
    if schema_dir:
        folder = folder.joinpath(schema_dir)
    schema: dict[str, Any] = yaml.safe_load(folder.joinpath(f"{version}.yaml").read_text(encoding="utf-8"))
    return schema


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("-", 1)[0].split("."))


def _as_of(node: dict[str, Any], release: tuple[int, ...]) -> dict[str, Any]:
    """``node`` without the properties whose ``since`` is a later release than ``release``, at any depth."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: _as_of(child, release) for name, child in value.items()
                        if SINCE_HINT not in child or _release_key(str(child[SINCE_HINT])) <= release}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _as_of(value, release)
        else:
            out[key] = value
    return out


def _since_hints(node: dict[str, Any], path: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for name, child in node.get("properties", {}).items():
        where = f"{path}.{name}" if path else name
        if SINCE_HINT in child:
            found.append((where, str(child[SINCE_HINT])))
        found += _since_hints(child, where)
    for key, suffix in (("items", "[]"), ("additionalProperties", "{}")):
        if isinstance(node.get(key), dict):
            found += _since_hints(node[key], path + suffix)
    return found


def _declared(value: Any, schema: dict[str, Any]) -> Any:
    """``value`` without the fields ``schema`` does not declare, at any depth (an object without declared properties,
    as a preserved Job template, is kept whole)."""
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        return {key: _declared(child, schema["properties"][key]) for key, child in value.items() if key in schema["properties"]}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_declared(child, schema["items"]) for child in value]
    return value


def _without_hints(node: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in (DESCRIPTOR_HINT, SINCE_HINT):
            continue
        if key == "properties":
            out[key] = {name: _without_hints(child) for name, child in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _without_hints(value)
        else:
            out[key] = copy.deepcopy(value)
    return out
