"""The API reference: docs/api.md lists the versions, docs/api/<version>.md holds each one's fields,
all rendered from the same schemas as the CRD."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import yaml

from node_maintenance import api

from .files import Output, RenderedFile
from .releases import Releases
from .templating import Templates

DOCS_FILE = "docs/api.md"
VERSIONS_DIR = PurePosixPath("docs/api")  # one page per version; nmo-pack owns the directory


def render_docs(templates: Templates, releases: Releases) -> Output:
    current = releases.current
    versions = [_version(name, releases) for name in api.VERSIONS]
    index = templates.text(
        "api.md.j2",
        group=api.GROUP,
        plural=api.PLURAL,
        short_names=api.SHORT_NAMES,
        current=current.version,
        served=current.served,
        storage=current.storage,
        versions=versions,
    )
    pages = [
        RenderedFile.text(str(VERSIONS_DIR / f"{version['name']}.md"), templates.text("api-version.md.j2", group=api.GROUP, version=version))
        for version in versions
    ]
    return Output((RenderedFile.text(DOCS_FILE, index), *pages), owned_dirs=(VERSIONS_DIR,))


def _version(name: str, releases: Releases) -> dict[str, Any]:
    document = api.load(name)
    schema = api.openapi_schema(name)
    spec = schema["properties"]["spec"]
    return {
        "name": name,
        "deprecation": document.get("deprecation"),
        "description": schema["description"],
        "example": yaml.safe_dump({"apiVersion": f"{api.GROUP}/{name}", "kind": api.KIND, **document["example"]}, sort_keys=False),
        "releases": [r.version for r in releases.releases if name in r.served],
        "sections": [
            {"title": "spec", "rows": _rows(spec, "spec")},
            {"title": "status", "rows": _rows(schema["properties"]["status"], "status")},
        ],
        "rules": spec.get("x-kubernetes-validations", []),
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


def _type(node: dict[str, Any]) -> str:
    kind = node.get("type", "object")
    if kind == "array":
        return f"[]{_type(node.get('items', {}))}"
    if kind == "object" and "additionalProperties" in node:
        return f"map[string]{_type(node['additionalProperties'])}"
    return node.get("format", kind) if kind in ("integer", "string") and node.get("format") else kind


def _description(node: dict[str, Any]) -> str:
    parts = [" ".join(node.get("description", "").split())]
    if "enum" in node:
        parts.append("One of: " + ", ".join(f"`{v}`" for v in node["enum"]) + ".")
    if "pattern" in node:
        parts.append(f"Pattern: `{node['pattern']}`.")
    for key, label in (("minimum", "Minimum"), ("maximum", "Maximum"), ("maxLength", "Max length")):
        if key in node:
            parts.append(f"{label}: {node[key]}.")
    return " ".join(p for p in parts if p).replace("|", "\\|")
