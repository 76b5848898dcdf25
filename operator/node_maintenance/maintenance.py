"""The life of one NodeMaintenance: take the node, drain it, report; and give the node back on delete.

Everything is recomputed from the cluster on each step (the node's annotations, its pods, the object's
status), so the operator can be killed at any point and resumes where the cluster stands.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from dataclasses import dataclass
from typing import Any, Callable

from kubernetes.client.exceptions import ApiException

from . import api, metrics, node as nodes, status as st
from .conversion import HUB, convert, status_fields
from .drain import Drainer
from .kube import Kube, nm_path, node_path

NODE_RETRY_SECONDS = 15.0
DRAIN_TICK_SECONDS = 1.0
IDLE_TICK_SECONDS = 5.0

# Names of the NodeMaintenances this process has seen holding their node (the "active" gauge).
_holding: set[str] = set()

# (object, type, reason, message): posts a Kubernetes Event about a NodeMaintenance or a Node.
EventSink = Callable[[dict[str, Any], str, str, str], None]


@dataclass
class Outcome:
    phase: str
    sleep: float


def _age_seconds(body: dict[str, Any]) -> float:
    created = datetime.datetime.strptime(body["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
    return (datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) - created).total_seconds()


def _node_ref(node: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node["metadata"]["name"], "uid": node["metadata"]["uid"]}}


class Maintenance:
    def __init__(self, kube: Kube, body: dict[str, Any], event: EventSink, log: logging.LoggerAdapter, *, version: str) -> None:
        self.kube = kube
        self.version = version
        self.name = body["metadata"]["name"]
        self.node_name = body["spec"]["nodeName"]
        self.event = event
        self.log = log
        self.drainer = Drainer(kube, self.node_name)
        self.phase = (body.get("status") or {}).get("phase")

    # ------------------------------------------------------------------ one step
    async def step(self, body: dict[str, Any]) -> float:
        """Advance the maintenance once; return how long to wait before the next step.

        ``body`` is as served in the working version; decisions read its v1beta1 view, where the
        conversion restores what an older version parks in annotations (such as ``spec.drain``).
        """
        body = convert(body, f"{api.GROUP}/{HUB}")
        node = await asyncio.to_thread(self.kube.get, node_path(self.node_name))
        if node is None:
            await self._report(body, st.FAILED, 0, 0, [], f"node {self.node_name!r} not found; "
                               "the maintenance starts when a node of that name exists")
            return NODE_RETRY_SECONDS
        holder = nodes.holder_of(node)
        if holder and holder != self.name and await asyncio.to_thread(self.kube.get, nm_path(holder, version=self.version)):
            await self._report(body, st.FAILED, 0, 0, [], f"node {self.node_name!r} is already in maintenance by "
                               f"NodeMaintenance {holder}; delete this NodeMaintenance, or delete {holder} to take over")
            return NODE_RETRY_SECONDS
        if holder != self.name or not node["spec"].get("unschedulable") or not nodes.has_taint(node):
            try:
                await asyncio.to_thread(self.kube.patch, node_path(self.node_name), nodes.begin_patch(node, self.name))
            except ApiException as error:
                if error.status == 409:  # the node changed meanwhile; decide again on fresh state
                    return 0.2
                raise
            if holder != self.name:
                message = f"node {self.node_name} cordoned and tainted for maintenance: {body['spec'].get('reason', '')}"
                self.log.info("began maintenance")
                self.event(body, "Normal", "BeginMaintenance", message)
                self.event(_node_ref(node), "Normal", "BeginMaintenance", f"{message} (NodeMaintenance {self.name})")
        _holding.add(self.name)
        metrics.ACTIVE.set(len(_holding))
        return await self._drain(body, fresh=holder != self.name)

    async def _drain(self, body: dict[str, Any], *, fresh: bool) -> float:
        drain = body["spec"].get("drain") or {}
        timeout = drain.get("timeoutSeconds") or 0
        timed_out = bool(timeout) and _age_seconds(body) > timeout
        result = await self.drainer.run_pass(drain.get("podSelector"), drain.get("gracePeriodSeconds"), evict=not timed_out)
        previous = body.get("status") or {}
        # Totals describe the node when this maintenance took it; a restarted operator keeps them.
        keep = not fresh and "evictionPods" in previous
        total = previous["totalpods"] if keep else result.total
        to_evict = previous["evictionPods"] if keep else len(result.to_go)
        if not result.to_go:
            await self._report(body, st.SUCCEEDED, total, to_evict, [], "")
            return IDLE_TICK_SECONDS
        if timed_out:
            reasons = result.error_text() or "still terminating"
            pods = ", ".join(f"{ns}/{name}" for ns, name in result.pending)
            await self._report(body, st.FAILED, total, to_evict, result.pending,
                               f"drain timed out after {timeout}s with pods left: {pods} ({reasons}); "
                               "the node stays cordoned until this NodeMaintenance is deleted")
            return IDLE_TICK_SECONDS
        await self._report(body, st.RUNNING, total, to_evict, result.pending, result.error_text())
        return DRAIN_TICK_SECONDS

    async def _report(self, body: dict[str, Any], phase: str, total: int, to_evict: int,
                      pending: list[tuple[str, str]], error: str) -> None:
        previous = body.get("status") or {}
        new = st.build(previous, phase=phase, total=total, eviction_pods=to_evict, pending=pending,
                       last_error=error, generation=body["metadata"].get("generation", 1), now=st.now_rfc3339())
        # Only what the working version holds is written (v1alpha1 has no conditions, for one).
        held = status_fields(self.version)
        new = {key: value for key, value in new.items() if key in held}
        if not st.same({key: value for key, value in previous.items() if key in held}, new):
            await asyncio.to_thread(self.kube.patch, nm_path(self.name, version=self.version, subresource="status"), {"status": new})
        if phase != self.phase:
            self._announce(body, phase, error)
        self.phase = phase

    def _announce(self, body: dict[str, Any], phase: str, error: str) -> None:
        if phase == st.SUCCEEDED:
            metrics.DRAIN_SECONDS.observe(_age_seconds(body))
            self.log.info("node drained")
            self.event(body, "Normal", "SucceedMaintenance", f"node {self.node_name} drained")
        elif phase == st.FAILED:
            self.log.warning("maintenance failed: %s", error)
            self.event(body, "Warning", "FailedMaintenance", error)


def end(kube: Kube, body: dict[str, Any], event: EventSink, log: logging.LoggerAdapter) -> None:
    """Give the node back if this NodeMaintenance holds it: remove our taint, uncordon unless it was cordoned before."""
    name, node_name = body["metadata"]["name"], body["spec"]["nodeName"]
    while True:
        node = kube.get(node_path(node_name))
        if node is None or nodes.holder_of(node) != name:
            event(body, "Normal", "RemovedMaintenance", f"maintenance of node {node_name} removed")
            return
        try:
            kube.patch(node_path(node_name), nodes.end_patch(node))
            break
        except ApiException as error:
            if error.status != 409:
                raise
    _holding.discard(name)
    metrics.ACTIVE.set(len(_holding))
    log.info("removed maintenance")
    event(body, "Normal", "RemovedMaintenance", f"maintenance of node {node_name} removed")
    event(_node_ref(node), "Normal", "RemovedMaintenance", f"NodeMaintenance {name} removed")
    if nodes.will_uncordon(node):
        log.info("uncordoned node")
        event(_node_ref(node), "Normal", "Uncordon", f"node {node_name} is schedulable again")
