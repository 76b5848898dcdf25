"""The NodeMaintenance API: names shared by the runtime and the packaging, and each version's schema.

Each version's schema lives in ``schemas/<version>.yaml``, the single source the CRD, the CSV
descriptors and the API reference are rendered from. Schemas carry ``csvDescriptor`` hints for
the ClusterServiceVersion, which :func:`openapi_schema` removes so the CRD gets a plain schema.
"""

from __future__ import annotations

import copy
from functools import cache
from importlib import resources
from typing import Any

import yaml

GROUP = "nodemaintenance.kubevirt.io"
KIND = "NodeMaintenance"
LIST_KIND = "NodeMaintenanceList"
PLURAL = "nodemaintenances"
SINGULAR = "nodemaintenance"
SHORT_NAMES = ("nm",)
CRD_NAME = f"{PLURAL}.{GROUP}"
VERSIONS = ("v1alpha1", "v1alpha3", "v1beta1")
DESCRIPTOR_HINT = "csvDescriptor"


@cache
def _document(version: str) -> dict[str, Any]:
    if version not in VERSIONS:
        raise KeyError(f"unknown NodeMaintenance API version {version!r}; known: {', '.join(VERSIONS)}")
    text = resources.files(__package__).joinpath("schemas", f"{version}.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def load(version: str) -> dict[str, Any]:
    """The whole schema document of one version (a copy, so callers may change it)."""
    return copy.deepcopy(_document(version))


def openapi_schema(version: str) -> dict[str, Any]:
    """The version's openAPIV3Schema exactly as the CRD declares it, without descriptor hints."""
    return _without_hints(_document(version)["openAPIV3Schema"])


def _without_hints(node: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == DESCRIPTOR_HINT:
            continue
        if key == "properties":
            out[key] = {name: _without_hints(child) for name, child in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _without_hints(value)
        else:
            out[key] = copy.deepcopy(value)
    return out
