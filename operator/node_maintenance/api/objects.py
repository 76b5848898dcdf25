"""How the code names one object: ``namespace/name`` (``/name`` for a cluster-scoped one)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def key_of(obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"
