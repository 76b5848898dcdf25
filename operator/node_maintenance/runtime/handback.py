"""Giving the node back when a NodeMaintenance is deleted (the drain itself is ``engine``'s job).

Everything is read from the Node itself (the holder and the earlier schedulability are recorded
on it), so the operator can be killed at any point and still restores the node exactly.
"""

from __future__ import annotations

import logging
from typing import Any

from node_maintenance.api.paths import node_path
from node_maintenance.client.errors import Conflict
from node_maintenance.client.http import AsyncKube
from node_maintenance.coordination import remediation as rem
from node_maintenance.drain import node as nodes
from node_maintenance.runtime import metrics
from node_maintenance.runtime.executor import EventSink
from node_maintenance.runtime.leases import LeaseKeeper


async def end(kube: AsyncKube, body: dict[str, Any], event: EventSink, log: logging.LoggerAdapter[logging.Logger], active: metrics.Active,
              lease_namespace: str = "") -> None:
    """Give the node back if this NodeMaintenance holds it: remove our taint, uncordon unless it was cordoned before,
    put the remediation label back as it was, then release the remediation Lease (held in ``lease_namespace``)."""
    name, node_name = body["metadata"]["name"], body["spec"]["nodeName"]
    active.holding(name, False)
    while True:
        node = await kube.get(node_path(node_name))
        if node is None or nodes.holder_of(node) != name:
            if lease_namespace and (node is None or nodes.holder_of(node) is None):
                # Deleted between taking the Lease and taking the node: no other maintenance uses that Lease.
                await LeaseKeeper(kube, lease_namespace, node_name).release()
            event(body, "Normal", "RemovedMaintenance", f"maintenance of node {node_name} removed")
            return
        try:
            await kube.patch(node_path(node_name), rem.restore(node, nodes.end_patch(node)))
            break
        except Conflict:  # the node changed meanwhile: decide again on the fresh node
            continue
    if lease_namespace:
        await LeaseKeeper(kube, lease_namespace, node_name).release()
    log.info("removed maintenance")
    node_ref = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node_name, "uid": node["metadata"]["uid"]}}
    event(body, "Normal", "RemovedMaintenance", f"maintenance of node {node_name} removed")
    event(node_ref, "Normal", "RemovedMaintenance", f"NodeMaintenance {name} removed")
    if nodes.will_uncordon(node):
        log.info("uncordoned node")
        event(node_ref, "Normal", "Uncordon", f"node {node_name} is schedulable again")
