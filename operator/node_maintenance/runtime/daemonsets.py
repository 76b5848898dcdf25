"""Whether the DaemonSets a node's pods name still exist: what `kubectl drain --force` reads to evict a
DaemonSet pod whose DaemonSet is gone.

Got when an unfinished pod names one; no watch, so a node without DaemonSet pods costs nothing. A DaemonSet
found is not read again for the rest of the maintenance: deleted later, it takes its pods along or orphans
them (dropping their ownerReference), which the pod watch shows. One not found is read again while a pod
still names it, as a DaemonSet of that name made anew (a replace) owns the pods it then starts. A read that
failed leaves the DaemonSet unknown: its pods stay, and the engine looks again soon.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from node_maintenance.api.paths import daemonset_path
from node_maintenance.client.errors import KubeError, NotFound
from node_maintenance.client.protocol import KubeApi
from node_maintenance.drain import pods

log = logging.getLogger(__name__)


class DaemonSetLookup:
    """What one drain knows of the DaemonSets its node's pods name ("namespace/name")."""

    def __init__(self, kube: KubeApi) -> None:
        self.kube = kube
        self.found: set[str] = set()  # seen to exist
        self.unknown: set[str] = set()  # wanted at the last read, and not read

    async def read(self, node_pods: Iterable[dict[str, Any]]) -> dict[str, bool]:
        """Whether each DaemonSet ``node_pods`` need exists, getting those not found before; one whose read failed is left out."""
        wanted = pods.daemonsets_to_read(node_pods)
        self.found &= wanted
        unread = sorted(wanted - self.found)
        known = dict.fromkeys(self.found, True)
        for key, exists in zip(unread, await asyncio.gather(*(self._exists(key) for key in unread)), strict=True):
            if exists is not None:
                known[key] = exists
        self.found = {key for key, exists in known.items() if exists}
        self.unknown = wanted - known.keys()
        return known

    async def _exists(self, key: str) -> bool | None:
        namespace, name = key.split("/", 1)
        try:
            await self.kube.request("GET", daemonset_path(namespace, name))
            return True
        except NotFound as missing:
            if missing.names("daemonsets", name):
                return False
            # A path not served (an API server starting): no proof the DaemonSet is gone.
            log.warning("DaemonSet %s could not be read; its pods stay until it can: %s", key, missing)
            return None
        except KubeError as error:
            log.warning("DaemonSet %s could not be read; its pods stay until it can: %s", key, error)
            return None
