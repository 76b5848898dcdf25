"""Whether a value fits a version's schema, by the OpenAPI keywords our CRDs use.

The API server checks what a client sends against the schema of the version it was sent in, never
what a conversion adds: the fields a conversion restores from its annotation are checked here
against the schema of the version they are restored into. Types, enums, bounds, lengths, patterns,
required and unknown properties are checked; the CEL rules (``x-kubernetes-validations``) are not.
"""

from __future__ import annotations

import datetime
import re
from functools import cache
from typing import Any

INT64 = (-(2**63), 2**63 - 1)
KINDS = {"boolean": "a boolean", "integer": "an integer", "number": "a number", "string": "a string", "array": "an array",
         "object": "an object"}


def problem(value: Any, schema: dict[str, Any], path: str) -> str | None:
    """What in ``value`` (found at ``path``) does not fit ``schema``, naming where and why; None if it fits."""
    kind = schema.get("type")
    if kind is not None and not _is(value, kind):
        return f"{path} is {kind_of(value)}, not {KINDS[kind]}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{path} is {value!r}, not one of {', '.join(map(str, schema['enum']))}"
    if isinstance(value, str):
        return _string_problem(value, schema, path)
    if isinstance(value, int) and not isinstance(value, bool):
        if value < schema.get("minimum", INT64[0]):
            return f"{path} is {value}, less than {schema.get('minimum', INT64[0])}"
        if value > schema.get("maximum", INT64[1]):
            return f"{path} is {value}, more than {schema.get('maximum', INT64[1])}"
        return None
    if isinstance(value, list):
        if len(value) > schema.get("maxItems", len(value)):
            return f"{path} has {len(value)} items, more than {schema['maxItems']}"
        items = schema.get("items", {})
        return next((found for index, item in enumerate(value) if (found := problem(item, items, f"{path}[{index}]"))), None)
    if isinstance(value, dict):
        return _object_problem(value, schema, path)
    return None


def _string_problem(value: str, schema: dict[str, Any], path: str) -> str | None:
    if len(value) < schema.get("minLength", 0):
        return f"{path} has {len(value)} characters, fewer than {schema['minLength']}"
    if len(value) > schema.get("maxLength", len(value)):
        return f"{path} has {len(value)} characters, more than {schema['maxLength']}"
    if "pattern" in schema and not _pattern(schema["pattern"]).search(value):
        return f"{path} is {value!r}, which does not match {schema['pattern']}"
    if schema.get("format") == "date-time" and not _is_date_time(value):
        return f"{path} is {value!r}, not an RFC 3339 date-time"
    return None


def _object_problem(value: dict[str, Any], schema: dict[str, Any], path: str) -> str | None:
    missing = [name for name in schema.get("required", []) if name not in value]
    if missing:
        return f"{path} lacks {', '.join(missing)}"
    properties, others = schema.get("properties"), schema.get("additionalProperties")
    for name, child in value.items():
        if properties is not None and name in properties:
            found = problem(child, properties[name], f"{path}.{name}")
        elif isinstance(others, dict):
            found = problem(child, others, f"{path}.{name}")
        elif properties is not None:
            found = f"{path}.{name} is not a field of this version"
        else:
            found = None  # a schema that says nothing of its properties (metadata) takes any
        if found:
            return found
    return None


def _is(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, {"string": str, "boolean": bool, "array": list, "object": dict}[kind])


def kind_of(value: Any) -> str:
    """What a JSON value is, as a message names it: ``an object``, ``a string``, ``null``."""
    types = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}
    return KINDS[types[type(value)]] if type(value) in types else "null"


@cache
def _pattern(pattern: str) -> re.Pattern[str]:
    """The schema's pattern in Python's dialect: a final ``$`` is the end of the text, as in the API server's (Go's),
    where Python's would also match before a final newline."""
    return re.compile(pattern[:-1] + r"\Z" if pattern.endswith("$") and not pattern.endswith(r"\$") else pattern)


def _is_date_time(text: str) -> bool:
    """RFC 3339 with a time zone (``Z`` or an offset), as the API server's date-time format wants."""
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)", text):
        return False
    try:
        datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True
