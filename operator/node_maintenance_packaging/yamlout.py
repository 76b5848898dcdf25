"""Deterministic YAML: insertion-ordered keys, block style, multi-line strings as literal blocks.

Every rendered YAML file goes through here, so the same input always gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml


class _Dumper(yaml.SafeDumper):
    """SafeDumper that indents lists under their key, as kubectl and operator-sdk write manifests."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(document: Any) -> str:
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=4096)


def dump_all(documents: Iterable[Any]) -> str:
    return yaml.dump_all(
        list(documents), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=4096, explicit_start=True
    )
