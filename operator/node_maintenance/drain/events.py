"""The events a drain step or a hand-back posts, as the executor reads them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    on_node: bool  # about the Node, else about the NodeMaintenance (or ``pod``)
    type: str
    reason: str
    message: str
    pod: tuple[str, str, str] | None = None  # (namespace, name, uid): about this pod instead
