"""Lossless conversion between the NodeMaintenance API versions, through v1beta1 as the hub.

Which spec and status fields a version can hold is read from its schema (the single source of truth).
On the way down, whatever the target cannot hold is parked, as JSON, in our own annotation; on the
way up it is restored and the annotation removed, so an old client that edits ``reason`` keeps
``spec.drain``. v1alpha3 names the node by ``metadata.name`` when ``spec.nodeName`` is absent; the
hub always has an explicit ``nodeName`` and remembers, in a second annotation, that it was implicit.

Any client that writes an old version writes the annotation too, and the API server checks only the
fields of the version written. So a parked field is restored only where the source version has no
such field (the annotation never overrides ``spec.nodeName`` or ``status.phase``), and only when it
fits the hub's schema; what is not restored is dropped and reported, never a failed conversion: one
object's annotation must not fail every review (every list) it is part of.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

from node_maintenance import api
from node_maintenance.api import HUB, schema_check

ANNOTATION_PREFIX = f"conversion.{api.GROUP}/"
PARKED = ANNOTATION_PREFIX + "v1beta1-fields"
IMPLICIT_NODE_NAME = ANNOTATION_PREFIX + "implicit-node-name"
SECTIONS = ("spec", "status")


class ConversionError(ValueError):
    """The object cannot be converted; the message says which field and why."""


@dataclass(frozen=True)
class Converted:
    """An object converted, and what of its parked fields was dropped: one message per field, naming it and why."""

    obj: dict[str, Any]
    dropped: tuple[str, ...] = ()


@cache
def _fields(version: str) -> dict[str, frozenset[str]]:
    properties = api.openapi_schema(version)["properties"]
    return {section: frozenset(properties[section].get("properties", {})) for section in SECTIONS}


@cache
def _hub_schemas() -> dict[str, dict[str, Any]]:
    """The schema of each spec and status field of the hub (read once: shared, never changed)."""
    properties = api.openapi_schema(HUB)["properties"]
    return {section: properties[section]["properties"] for section in SECTIONS}


def status_fields(version: str) -> frozenset[str]:
    """The status fields ``version`` can hold; the apiserver prunes any other."""
    return _fields(version)["status"]


@cache  # asked twice per object of a review; only valid versions are remembered (errors are raised, not cached)
def version_of(api_version: str) -> str:
    group, _, version = api_version.rpartition("/")
    if group != api.GROUP or version not in api.VERSIONS:
        raise ConversionError(
            f"apiVersion {api_version!r} is not a NodeMaintenance version; use {api.GROUP}/<one of {', '.join(api.VERSIONS)}>"
        )
    return version


def _annotations(obj: dict[str, Any]) -> dict[str, str]:
    return cast(dict[str, str], obj.setdefault("metadata", {}).setdefault("annotations", {}))


def _drop_empty_annotations(obj: dict[str, Any]) -> None:
    metadata = obj.get("metadata", {})
    if metadata.get("annotations") == {}:
        del metadata["annotations"]


def _to_hub(obj: dict[str, Any], version: str, dropped: list[str]) -> dict[str, Any]:
    _restore(obj, version, dropped)
    annotations = _annotations(obj)
    if version == "v1alpha3" and not obj.get("spec", {}).get("nodeName"):
        obj.setdefault("spec", {})["nodeName"] = obj["metadata"].get("name", "")
        annotations[IMPLICIT_NODE_NAME] = "true"
    _drop_empty_annotations(obj)
    return obj


def _restore(obj: dict[str, Any], version: str, dropped: list[str]) -> None:
    """Put the parked fields back into ``obj`` (of ``version``) and remove the annotation; each field not restored
    gets a message in ``dropped``."""
    text = _annotations(obj).pop(PARKED, None)
    if text is None:
        return
    where = f"metadata.annotations[{PARKED!r}]"
    try:
        parked = json.loads(text)
    except (TypeError, ValueError, RecursionError) as error:
        dropped.append(f"{where} is not JSON ({error or 'nested too deeply'}); its parked fields were dropped")
        return
    if not isinstance(parked, dict):
        dropped.append(f"{where} is not a JSON object; its parked fields were dropped")
        return
    for section, fields in parked.items():
        if section not in SECTIONS or not isinstance(fields, dict):
            dropped.append(f"{where}: {section} is not an object of spec or status fields; dropped")
            continue
        for name, value in fields.items():
            why = _not_restored(section, name, value, version)
            if why is None:
                obj.setdefault(section, {})[name] = value
            else:
                dropped.append(f"{where}: {why}")


def _not_restored(section: str, name: str, value: Any, version: str) -> str | None:
    """Why a parked field is not restored into an object of ``version``; None to restore it."""
    if name in _fields(version)[section]:
        return f"{section}.{name} was ignored: {version} has this field, and its own value stands"
    schema = _hub_schemas()[section].get(name)
    if schema is None:
        return f"{section}.{name} is not a field of {HUB}; dropped"
    problem = schema_check.problem(value, schema, f"{section}.{name}")
    return f"{problem}; {section}.{name} was dropped" if problem else None


def _from_hub(obj: dict[str, Any], version: str) -> dict[str, Any]:
    if version == HUB:
        return obj
    annotations = _annotations(obj)
    spec = obj.get("spec", {})
    # Only a nodeName that is the object's name goes implicit: the annotation must not hide another node.
    if version == "v1alpha3" and annotations.pop(IMPLICIT_NODE_NAME, None) == "true" and spec.get("nodeName") == obj["metadata"].get("name"):
        spec.pop("nodeName")
    keep = _fields(version)
    parked: dict[str, dict[str, Any]] = {}
    for section in SECTIONS:
        content = obj.get(section)
        if not isinstance(content, dict):
            continue
        moved = {key: content.pop(key) for key in sorted(set(content) - keep[section])}
        if moved:
            parked[section] = moved
    if parked:
        annotations[PARKED] = json.dumps(parked, sort_keys=True, separators=(",", ":"))
    _drop_empty_annotations(obj)
    return obj


def _writable(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``obj`` that the conversion may change: the object, its metadata, annotations, spec and
    status are new dicts; deeper values are shared, as no step changes them (a review of many objects
    spends its time copying otherwise)."""
    out = dict(obj)
    if "metadata" in obj:
        out["metadata"] = metadata = dict(obj["metadata"])
        if "annotations" in metadata:
            metadata["annotations"] = dict(metadata["annotations"])
    for section in SECTIONS:
        if isinstance(obj.get(section), dict):
            out[section] = dict(obj[section])
    return out


def convert(obj: dict[str, Any], desired_api_version: str) -> dict[str, Any]:
    """Return ``obj`` converted to ``desired_api_version`` (:func:`converted`, without what it dropped)."""
    return converted(obj, desired_api_version).obj


def converted(obj: dict[str, Any], desired_api_version: str) -> Converted:
    """``obj`` converted to ``desired_api_version``, and the parked fields dropped on the way; the input is not
    modified, and values below the top of ``spec``, ``status`` and ``metadata`` are shared with it (read-only, as
    JSON to be sent is).

    Only ``apiVersion``, ``spec``, ``status`` and annotations under our conversion prefix change; an object of the
    desired version is returned as it is.
    """
    if not isinstance(obj, dict):
        raise ConversionError("each object must be a JSON object")
    source = version_of(str(obj.get("apiVersion", "")))
    target = version_of(desired_api_version)
    if obj.get("kind") != api.KIND:
        raise ConversionError(f"kind {obj.get('kind')!r} cannot be converted; only {api.KIND} is served here")
    for section in (*SECTIONS, "metadata"):
        if section in obj and not isinstance(obj[section], dict):
            raise ConversionError(f"{section} must be an object")
    annotations = obj.get("metadata", {}).get("annotations", {})
    if not isinstance(annotations, dict):
        raise ConversionError("metadata.annotations must be an object")
    out = _writable(obj)
    dropped: list[str] = []
    if source != target:
        out = _from_hub(_to_hub(out, source, dropped), target)
    out["apiVersion"] = f"{api.GROUP}/{target}"
    return Converted(obj=out, dropped=tuple(dropped))
