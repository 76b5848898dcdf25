"""The shape of one field of releases.yaml: a refusal names the field and what to write instead."""

from __future__ import annotations

from typing import Any

from .errors import PackagingError


def field(doc: dict[str, Any], name: str, kind: type, where: str = "releases.yaml") -> Any:
    """The field's value, of the type the format gives it."""
    value = doc.get(name)
    if not isinstance(value, kind):
        raise PackagingError(f"{where}: {name}: expected a {kind.__name__}, got {value!r}; set it (see the comments at the top of releases.yaml)")
    return value


def string_list(doc: dict[str, Any], name: str, where: str) -> list[str]:
    """A list of strings; absent is empty."""
    value = doc.get(name, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise PackagingError(f"{where}: {name}: expected a list of strings, got {value!r}")
    return value
