"""Parked fields a conversion dropped (see :mod:`node_maintenance.api.conversion`), told where an admin looks: a
warning in the log naming the NodeMaintenance, and a Warning event on it.

A conversion runs at every read of an object in a version other than the stored one, so each version of an object
(its uid and resourceVersion) is told once per replica. The event is posted in the background, so that a slow API
server never holds a review back, and at most MAX_POSTING at a time: past that, the log alone tells it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import Any

from node_maintenance import api
from node_maintenance.api import timestamps
from node_maintenance.api.paths import events_path
from node_maintenance.client.config import PRODUCT
from node_maintenance.client.protocol import BlockingKubeApi

log = logging.getLogger(__name__)
REASON = "ConversionDroppedFields"
EVENTS_NAMESPACE = "default"  # where the events of a cluster-scoped object go, as kubectl and kopf post them
MAX_MESSAGE = 1024  # as the operator's other events
REMEMBERED = 1024  # object versions told
MAX_POSTING = 8


class DroppedFields:
    """Tells, once per object version, what a conversion dropped; without API access (``kube`` None), logs only."""

    def __init__(self, kube: BlockingKubeApi) -> None:
        self.kube = kube
        self._told: OrderedDict[tuple[str, ...], None] = OrderedDict()
        self._posting: set[asyncio.Task[None]] = set()

    def tell(self, obj: dict[str, Any], dropped: tuple[str, ...]) -> None:
        """Log and post what was dropped from ``obj`` (the object as sent for conversion); call on the event loop."""
        metadata = obj.get("metadata") or {}
        name, uid = str(metadata.get("name", "")), str(metadata.get("uid", ""))
        key = (name, uid, str(metadata.get("resourceVersion", "")), *dropped)
        if key in self._told:
            return
        self._told[key] = None
        if len(self._told) > REMEMBERED:
            self._told.popitem(last=False)
        log.warning("a conversion dropped parked fields of NodeMaintenance %s: %s", name, "; ".join(dropped),
                    extra={"nodeMaintenance": name, "dropped": list(dropped)})
        if len(self._posting) >= MAX_POSTING:
            return
        task = asyncio.get_running_loop().create_task(self._post(event(obj, dropped)))
        self._posting.add(task)
        task.add_done_callback(self._posting.discard)

    async def _post(self, body: dict[str, Any]) -> None:
        assert self.kube is not None
        try:
            await asyncio.to_thread(self.kube.request, "POST", events_path(EVENTS_NAMESPACE), body=body)
        except Exception as error:  # the log has told it already
            log.warning("could not post the %s event: %s", REASON, error)


def event(obj: dict[str, Any], dropped: tuple[str, ...]) -> dict[str, Any]:
    """The Warning event (core/v1) on ``obj`` saying what was dropped and how to keep it."""
    metadata = obj.get("metadata") or {}
    name = str(metadata.get("name", ""))
    now = timestamps.rfc3339(timestamps.now())
    message = (f"A conversion dropped what it cannot take from the fields parked in an annotation: {'; '.join(dropped)}. "
               f"Set these fields through {api.GROUP}/{api.HUB}, not through the annotation.")
    return {
        "metadata": {"generateName": f"{name}.", "namespace": EVENTS_NAMESPACE},
        "involvedObject": {"apiVersion": str(obj.get("apiVersion", "")), "kind": api.KIND, "name": name,
                           "uid": str(metadata.get("uid", ""))},
        "type": "Warning", "reason": REASON, "message": message[:MAX_MESSAGE],
        "source": {"component": PRODUCT}, "reportingComponent": PRODUCT,
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    }
