"""The API reference: docs/api.md lists the versions, docs/api/<version>.md holds each one's fields,
all rendered from the same schemas as the CRD."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any, TypedDict

import yaml

from node_maintenance import api

from .files import Output, RenderedFile
from .owned_crds import OwnedCrd
from .releases import Releases
from .templating import Templates

DOCS_FILE = "docs/api.md"
VERSIONS_DIR = PurePosixPath("docs/api")  # one page per version; nmo-pack owns the directory


class _Kind(TypedDict):
    """One kind as the templates read it."""

    kind: str
    plural: str
    short_names: tuple[str, ...]
    owned: OwnedCrd | None  # by the current release; None when it does not own this kind's CRD
    versions: list[dict[str, Any]]


def page_name(resource: api.Resource, version: str) -> str:
    """NodeMaintenance pages are named by version alone (they came first); other kinds' by kind and version."""
    return f"{version}.md" if resource is api.NODE_MAINTENANCE else f"{resource.singular}-{version}.md"


def render_docs(templates: Templates, releases: Releases) -> Output:
    current = releases.current
    kinds: list[_Kind] = [
        {
            "kind": resource.kind,
            "plural": resource.plural,
            "short_names": resource.short_names,
            "owned": next((o for o in current.crds if o.resource is resource), None),
            "versions": [_version(resource, name, releases) for name in resource.versions],
        }
        for resource in api.RESOURCES
    ]
    index = templates.text("api.md.j2", group=api.GROUP, current=current.version, kinds=kinds)
    pages = [
        RenderedFile.text(str(VERSIONS_DIR / version["page"]), templates.text("api-version.md.j2", group=api.GROUP, version=version))
        for kind in kinds
        for version in kind["versions"]
    ]
    return Output((RenderedFile.text(DOCS_FILE, index), *pages), owned_dirs=(VERSIONS_DIR,))


def _version(resource: api.Resource, name: str, releases: Releases) -> dict[str, Any]:
    document = resource.load(name)
    schema = document["openAPIV3Schema"]  # with its hints: a field's `since` shows in its description
    spec = schema["properties"]["spec"]
    served_by = [r.version for r in releases.releases for o in r.crds if o.resource is resource and name in o.served]
    return {
        "name": name,
        "kind": resource.kind,
        "page": page_name(resource, name),
        "deprecation": document.get("deprecation"),
        "description": schema["description"],
        "examples": [yaml.safe_dump({"apiVersion": f"{api.GROUP}/{name}", "kind": resource.kind, **example}, sort_keys=False)
                     for example in resource.examples(name)],
        "releases": served_by,
        "sections": [
            {"title": "spec", "rows": _rows(spec, "spec")},
            {"title": "status", "rows": _rows(schema["properties"]["status"], "status")},
        ],
        "rules": _rules(spec, "spec"),
    }


def _rows(node: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    required = set(node.get("required", []))
    for field, child in node.get("properties", {}).items():
        path = f"{prefix}.{field}"
        rows.append(
            {"path": path, "type": _type(child), "required": field in required, "description": _description(child)}
        )
        rows.extend(_rows(child, path))
        if child.get("type") == "array" and "properties" in child.get("items", {}):
            rows.extend(_rows(child["items"], f"{path}[]"))
    return rows


def _rules(node: dict[str, Any], path: str) -> list[dict[str, str]]:
    """Every CEL validation rule at or under ``node``, with the path of the field it is declared on."""
    found = [{"path": path, **rule} for rule in node.get("x-kubernetes-validations", [])]
    for field, child in node.get("properties", {}).items():
        found += _rules(child, f"{path}.{field}")
    if "properties" in node.get("items", {}):
        found += _rules(node["items"], f"{path}[]")
    return found


def _type(node: dict[str, Any]) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "integer or string"
    kind: str = node.get("type", "object")
    if kind == "array":
        return f"[]{_type(node.get('items', {}))}"
    if kind == "object" and "additionalProperties" in node:
        return f"map[string]{_type(node['additionalProperties'])}"
    if kind in ("integer", "string") and node.get("format"):
        format_: str = node["format"]
        return format_
    return kind


def _description(node: dict[str, Any]) -> str:
    parts = [" ".join(node.get("description", "").split())]
    if api.SINCE_HINT in node:
        parts.append(f"Since {node[api.SINCE_HINT]}.")
    if "enum" in node:
        parts.append("One of: " + ", ".join(f"`{v}`" for v in node["enum"]) + ".")
    if "pattern" in node:
        parts.append(f"Pattern: `{node['pattern']}`.")
    for key, label in (("minimum", "Minimum"), ("maximum", "Maximum"), ("maxLength", "Max length"), ("maxItems", "Max items")):
        if key in node:
            parts.append(f"{label}: {node[key]}.")
    return " ".join(p for p in parts if p).replace("|", "\\|")
