"""One watch of the cordoned nodes, shared by every drained maintenance.

A drained node needs watching only for what may still change it: someone uncordoning or changing it, or pods
bound to it later (listed when it changes, and now and then). A watch of its own per drained node would hold
a connection per node for as long as its maintenance exists; the nodes a drain leaves are all cordoned, so one
watch of ``spec.unschedulable=true`` sees them all. A drained engine is woken when its node changes or leaves
the selection (uncordoned, or gone).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from node_maintenance.api.paths import node_path
from node_maintenance.client.protocol import KubeApi
from node_maintenance.client.watch import Mirror
from node_maintenance.drain import nodes

SELECTOR = "spec.unschedulable=true"


class CordonedNodes:
    def __init__(self, kube: KubeApi) -> None:
        self.mirror = Mirror(kube, node_path(), self._changed, field_selector=SELECTOR, slim=nodes.slim)
        self._listeners: dict[str, Callable[[], None]] = {}  # node name -> its drained engine's wake
        self._task: asyncio.Task[None] | None = None

    def subscribe(self, node: str, listener: Callable[[], None]) -> None:
        """Call ``listener`` when ``node`` changes or leaves the cordoned nodes; starts the watch with the first."""
        self._listeners[node] = listener
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self.mirror.run(), name="cordoned nodes watch")

    def unsubscribe(self, node: str) -> None:
        self._listeners.pop(node, None)

    def current(self) -> bool:
        """Whether the watch has listed and its last read did not fail: only then does a node's absence mean it
        is not cordoned."""
        return self.mirror.synced.is_set() and not self.mirror.failure

    def node(self, name: str) -> dict[str, Any] | None:
        """``name`` as the watch keeps it; None while it is not cordoned (or not known to be, see :meth:`current`)."""
        return self.mirror.objects.get(f"/{name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _changed(self, key: str | None) -> None:
        if key is None:  # listed again: any of them may have changed
            for listener in list(self._listeners.values()):
                listener()
        elif (one := self._listeners.get(key.removeprefix("/"))) is not None:
            one()
