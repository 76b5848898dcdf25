"""Giving the node back when a NodeMaintenance is deleted (the drain itself is ``engine``'s job): read the
node, decide (:func:`drain.handback.hand_back`), carry it out; a node that changed meanwhile is read again."""

from __future__ import annotations

import logging
from typing import Any

from node_maintenance.api.paths import node_path
from node_maintenance.client.protocol import KubeApi
from node_maintenance.drain.handback import hand_back
from node_maintenance.runtime import metrics
from node_maintenance.runtime.executor import EventSink, Executor
from node_maintenance.runtime.leases import LeaseKeeper


def executor(kube: KubeApi, body: dict[str, Any], version: str, event: EventSink, log: logging.LoggerAdapter[logging.Logger],
             lease_namespace: str = "") -> Executor:
    """What carries out the hand-back of ``body`` (and a policy's hook before it); the node's remediation Lease is held
    in ``lease_namespace`` (empty: none)."""
    lease = LeaseKeeper(kube, lease_namespace, body["spec"]["nodeName"]) if lease_namespace else None
    return Executor(kube, body["metadata"]["name"], version, event, log, lease)


async def end(kube: KubeApi, body: dict[str, Any], executor: Executor, active: metrics.Active) -> None:
    """Give back the node ``body`` holds, through ``executor``."""
    name, node_name = body["metadata"]["name"], body["spec"]["nodeName"]
    active.holding(name, False)
    while True:
        node = await kube.get(node_path(node_name))
        if await executor.hand_back(hand_back(name, node_name, node, executor.lease is not None), body, node):
            return
