"""Status writes that an earlier write of ours, carried out late, cannot undo.

A write whose answer never came (the client's timeout, a restart) may still be carried out by the API server after a
newer one of ours. A merge patch without a precondition would then put the older status back: a policy's recovering
node dropped while it still holds its slot, a NodeMaintenance's record of its timeout's hand-back lost to the next
leader. So each status write carries the object's resourceVersion as last read, and the late one is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from node_maintenance.client.errors import Conflict
from node_maintenance.client.protocol import KubeApi


async def write_status(kube: KubeApi, path: str, version: str, status: Mapping[str, Any]) -> None:
    """Patch the status of the object at ``path``, as of its resourceVersion ``version``. An object changed since (an
    edit, or our own last write the watch has not shown yet) is read again once, for its resourceVersion alone: the
    status says what the writer decided, whatever else changed. A second conflict, or the object gone, is raised."""
    try:
        await kube.patch(f"{path}/status", {"metadata": {"resourceVersion": version}, "status": status})
    except Conflict:
        fresh = await kube.get(path)
        await kube.patch(f"{path}/status", {"metadata": {"resourceVersion": (fresh or {}).get("metadata", {}).get("resourceVersion")},
                                            "status": status})
