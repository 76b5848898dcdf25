"""What one drain watches of its own, by :class:`~node_maintenance.drain.memory.WatchMode`.

While a policy keeps it in line it watches nothing: the policies' watch of the nodes tells whether it may take its
node, and their changes wake it. From its slot on, one watch of the node and one of the pods bound to it (both
scoped by field selector). Once the node is drained both watches end: the watch of cordoned nodes that all drained
maintenances share (``cordoned``) tells of a change of the node, after which its pods are listed again, as they are
every LATE_PODS_SECONDS, for pods bound to it later.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from node_maintenance.api.paths import PODS, node_path
from node_maintenance.client.protocol import KubeApi
from node_maintenance.client.watch import Mirror
from node_maintenance.drain import nodes, pods
from node_maintenance.drain.memory import WatchMode
from node_maintenance.runtime.cordoned import CordonedNodes

# A drained node's pods are listed again this often (and at each change of the node): pods bound to it later go too.
LATE_PODS_SECONDS = 30.0


class DrainWatches:
    """The node and pod watches of one drain, started and ended as its watch mode changes."""

    def __init__(self, kube: KubeApi, cordoned: CordonedNodes, node_name: str, wake: Callable[[str | None], None]) -> None:
        self.kube = kube
        self.cordoned = cordoned
        self.node_name = node_name
        self.wake = wake
        self.mode = WatchMode.NOTHING  # what runs now
        # A maintenance in line has no watch of its own, nor the objects of one (a thousand in line add up): each is
        # made when first watched, and anew each time.
        self.node: Mirror | None = None
        self.pods: Mirror | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}  # "node", "pods" -> the task running that watch
        self.pods_listed = 0.0  # when the node's pods were last known in full (monotonic), once the pod watch has ended
        self.node_changed = False  # since then

    def _node_change(self, _key: str | None = None) -> None:
        self.node_changed = True
        self.wake(None)

    async def watch(self, mode: WatchMode) -> None:
        """Watch as ``mode`` says from now on: a watch still wanted runs on, one no longer wanted ends, and one started
        anew (what a stopped one kept may be stale) is waited for until listed."""
        wanted = ("node", "pods") if mode == WatchMode.NODE_AND_PODS else ()
        ending = [self._tasks.pop(kind) for kind in list(self._tasks) if kind not in wanted]
        for task in ending:
            task.cancel()
        await asyncio.gather(*ending, return_exceptions=True)
        if mode == WatchMode.DRAINED:  # the pod watch was current until now
            self.pods_listed, self.node_changed = asyncio.get_running_loop().time(), False
            self.cordoned.subscribe(self.node_name, self._node_change)
        else:
            self.cordoned.unsubscribe(self.node_name)
        started: list[Mirror] = []
        for kind in (kind for kind in wanted if kind not in self._tasks):
            if kind == "node":
                self.node = mirror = self.node_mirror()
            else:
                self.pods = mirror = self.pods_mirror()
            self._tasks[kind] = asyncio.create_task(mirror.run())
            started.append(mirror)
        self.mode = mode
        await asyncio.gather(*(mirror.synced.wait() for mirror in started))

    def node_mirror(self) -> Mirror:
        """A new watch of the node (not started)."""
        return Mirror(self.kube, node_path(), self._node_change, field_selector=f"metadata.name={self.node_name}", slim=nodes.slim)

    def pods_mirror(self) -> Mirror:
        """A new watch of the node's pods (not started)."""
        return Mirror(self.kube, PODS, self.wake, field_selector=f"spec.nodeName={self.node_name}", slim=pods.slim)

    def own_node(self) -> dict[str, Any] | None:
        """The node as its own watch shows it."""
        return next(iter(self.node.objects.values()), None) if self.node is not None else None

    def pod_objects(self) -> dict[str, dict[str, Any]]:
        return self.pods.objects if self.pods is not None else {}

    def late_pods_due_in(self) -> float:
        """Seconds until a drained node's pods are listed again (0: now)."""
        return max(0.0, self.pods_listed + LATE_PODS_SECONDS - asyncio.get_running_loop().time())

    async def late_pods(self) -> None:
        """Drained: list the node's pods when the node changed or LATE_PODS_SECONDS have passed since the last listing."""
        if self.node_changed or asyncio.get_running_loop().time() - self.pods_listed >= LATE_PODS_SECONDS:
            started, self.node_changed = asyncio.get_running_loop().time(), False  # a change from now on asks for the next listing
            if self.pods is None:
                self.pods = self.pods_mirror()
            await self.pods.refresh()  # a failure leaves it due
            self.pods_listed = started

    async def stop(self) -> None:
        await self.watch(WatchMode.NOTHING)
        self.cordoned.unsubscribe(self.node_name)
