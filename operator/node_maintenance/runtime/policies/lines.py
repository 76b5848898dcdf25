"""Each policy's line kept in order as NodeMaintenances come and go, so that a decision reads it in order instead of
sorting its pool again.

A fleet's line is long and changes one maintenance at a time: sorting five thousand of them again for every change (a
status write of one of them, say) costs the whole line per change. Here a maintenance joins the lines of the policies
selecting its node once, in its place (``policy.line.order``: its creation stamp and name, which never change), and
leaves them once; a line is sorted whole only when it is first read after what selects its nodes changed (a policy
edited, created or deleted, a listing), which ``forget`` says.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from typing import Any

from node_maintenance.policy import line

Place = tuple[Any, ...]  # line.order of a maintenance


class Lines:
    """The names of each policy's maintenances in line order, for the policies whose line was read since it was last
    forgotten; every maintenance of a node, deleting or not: a decision reads which of them stand."""

    def __init__(self) -> None:
        self._lines: dict[str, list[tuple[Place, str]]] = {}  # policy name -> (place, maintenance name), in order
        self._places: dict[str, Place] = {}  # each maintenance's place, as it joined

    def of(self, policy: str, gather: Callable[[], Iterable[Any]]) -> list[str]:
        """``policy``'s line; ``gather`` gives its maintenances when it is not kept (sorted once, then kept)."""
        kept = self._lines.get(policy)
        if kept is None:
            kept = self._lines[policy] = sorted((self._place(m), m["metadata"]["name"]) for m in gather())
        return [name for _, name in kept]

    def join(self, maintenance: Any, policies: Iterable[str]) -> None:
        """``maintenance`` is in the lines of ``policies`` (those kept; once, whatever changed of it since)."""
        name = maintenance["metadata"]["name"]
        entry = (self._place(maintenance), name)
        for policy in policies:
            kept = self._lines.get(policy)
            if kept is not None:
                at = bisect.bisect_left(kept, entry)
                if at == len(kept) or kept[at] != entry:
                    kept.insert(at, entry)

    def leave(self, name: str, policies: Iterable[str]) -> None:
        """The maintenance ``name`` is no longer in the lines of ``policies`` (those kept)."""
        place = self._places.get(name)
        if place is None:
            return
        entry = (place, name)
        for policy in policies:
            kept = self._lines.get(policy)
            if kept is not None:
                at = bisect.bisect_left(kept, entry)
                if at < len(kept) and kept[at] == entry:
                    del kept[at]

    def gone(self, name: str, policies: Iterable[str]) -> None:
        """The maintenance ``name`` is deleted: out of every line, its place forgotten."""
        self.leave(name, policies)
        self._places.pop(name, None)

    def _place(self, maintenance: Any) -> Place:
        """Its place, worked out when it first joins (its status writes bring it again and again; its place stays)."""
        name = maintenance["metadata"]["name"]
        place = self._places.get(name)
        if place is None:
            place = self._places[name] = line.order(maintenance)
        return place

    def forget(self) -> None:
        """What selects the nodes, or which maintenances exist, changed beyond what was told (a policy edited, a
        listing): every line is gathered and sorted again when next read."""
        self._lines, self._places = {}, {}
