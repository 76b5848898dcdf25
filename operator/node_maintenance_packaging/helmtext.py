"""Helm template text from a manifest built as data: the chart's templates are the bundle's objects, dumped as the
bundle dumps them, with Helm's expressions put where an admin's values go.

A manifest holds three kinds of marker, each dumped as a plain word and then replaced in the text:

- :class:`Expr`: inline template text (``{{ .Release.Namespace }}``), where a scalar goes;
- :class:`Block`: a value rendered by ``toYaml`` under its key (resources, tolerations), indented where the key is;
- :class:`Lines`: raw template lines (a conditional list item or mapping entry), as a list item, or as a mapping key
  whose value is ignored.

Everything else is the object's own text: any ``{{`` or ``}}`` in it (a Prometheus alert's ``{{ $labels.node }}``) is
escaped so that Helm prints it as it is.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from . import yamlout


@dataclass(frozen=True)
class Expr:
    """Template text in place of a scalar: one or more ``{{ … }}`` actions, and text between them."""

    text: str


@dataclass(frozen=True)
class Block:
    """``toYaml <value>`` under its key, at the key's indentation plus two."""

    value: str


@dataclass(frozen=True)
class Lines:
    """Template lines, each put at the indentation of the list item or mapping key this marker is."""

    lines: tuple[str, ...]


_BRACES = re.compile(r"\{\{|\}\}")
_MARKER = re.compile(r"__helm_(\d+)__")
_BLOCK_LINE = re.compile(r"^(\s*)([^\s].*?): __helm_(\d+)__$")
_LIST_LINE = re.compile(r"^(\s*)- __helm_(\d+)__$")
_KEY_LINE = re.compile(r"^(\s*)__helm_(\d+)__: null$")


def template(*documents: Any) -> str:
    """The documents as one Helm template (separated by ``---``), markers replaced."""
    counter = itertools.count()
    markers: dict[str, Expr | Block | Lines] = {}

    def marked(value: Any) -> Any:
        if isinstance(value, Expr | Block | Lines):
            name = f"__helm_{next(counter)}__"
            markers[name] = value
            return name
        if isinstance(value, dict):
            return {marked(key) if isinstance(key, Lines) else key: marked(item) for key, item in value.items()}
        if isinstance(value, list):
            return [marked(item) for item in value]
        return value

    text = "---\n".join(yamlout.dump(marked(document)) for document in documents)
    text = _BRACES.sub(lambda found: '{{ "' + found.group(0) + '" }}', text)
    out: list[str] = []
    for line in text.splitlines():
        out.extend(_replace(line, markers))
    return "\n".join(out) + "\n"


def _replace(line: str, markers: dict[str, Expr | Block | Lines]) -> list[str]:
    if found := _BLOCK_LINE.match(line):
        indent, key, number = found.groups()
        marker = markers[f"__helm_{number}__"]
        if isinstance(marker, Block):
            # Under a key that opens a list item ("- resources:"), the item's own keys are two columns further in.
            width = len(indent) + (4 if key.startswith("- ") else 2)
            return [f"{indent}{key}:", f"{' ' * width}{{{{- toYaml {marker.value} | nindent {width} }}}}"]
    if found := _LIST_LINE.match(line) or _KEY_LINE.match(line):
        indent, number = found.groups()
        marker = markers[f"__helm_{number}__"]
        if isinstance(marker, Lines):
            return [f"{indent}{text}" for text in marker.lines]
    return [_MARKER.sub(lambda m: _inline(markers[m.group(0)]), line)]


def _inline(marker: Expr | Block | Lines) -> str:
    if not isinstance(marker, Expr):
        raise ValueError(f"{marker!r} stands where only an inline expression can: put it under a key or as a list item")
    return marker.text
