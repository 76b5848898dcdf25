"""Listing a collection page by page, as client-go's pager does: a fleet's thousands of objects are never asked for,
nor held, in one answer (the API server bounds the work of each page, and a page is dropped once read)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from node_maintenance.client.protocol import BlockingKubeApi

# Objects per page of a listing, the watches' listings too: a thousand nodes' pods come in pieces, not in one
# answer held whole twice.
PAGE = 500


def items(kube: BlockingKubeApi, path: str, query: dict[str, str] | None = None) -> Iterator[dict[str, Any]]:
    """Every object of the collection at ``path`` (``query``: a label selector, say), read a page at a time (blocking calls)."""
    asked = {**(query or {}), "limit": str(PAGE)}
    while True:
        listing = kube.request("GET", path, query=asked)
        yield from listing.get("items") or []
        token = (listing.get("metadata") or {}).get("continue")
        if not token:
            return
        asked = {**(query or {}), "limit": str(PAGE), "continue": token}
