"""The events a drain step or a hand-back posts, as the executor reads them."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Type(enum.StrEnum):
    """An event's type, as Kubernetes knows them."""

    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True)
class Event:
    on_node: bool  # about the Node, else about the NodeMaintenance (or ``pod``)
    type: Type
    reason: str
    message: str
    pod: tuple[str, str, str] | None = None  # (namespace, name, uid): about this pod instead
