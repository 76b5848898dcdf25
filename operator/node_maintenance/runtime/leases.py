"""The remediation Lease of one node at run time: the reads a plan needs and the writes it asks for.

The rules (who holds a Lease, the record we write, when to claim) are ``coordination.lease_rules`` and
``coordination.remediation``, decided in the drain's plan; this keeper reads the Lease only when a
claim or renewal is due, so a held Lease costs a read and a write per renewal period.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from node_maintenance.api.paths import NAMESPACES, lease_path
from node_maintenance.client.errors import ApiError, Conflict, Forbidden, Invalid, NotFound
from node_maintenance.client.protocol import KubeApi
from node_maintenance.coordination import lease_rules
from node_maintenance.coordination.remediation import (
    FORBIDDEN_RECHECK_SECONDS,
    HOLDER_IDENTITY,
    LeaseClaim,
    LeaseState,
    LeaseView,
    lease_name,
    renew_after,
)

log = logging.getLogger(__name__)


class LeaseKeeper:
    """What is known of one node's Lease, and the requests that read, write and release it."""

    def __init__(self, kube: KubeApi, namespace: str, node_name: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.node_name = node_name
        self.path = lease_path(namespace, lease_name(node_name))
        self.known: LeaseState | None = None  # what the last claim (or look) met
        self._due_at = 0.0  # the event loop's time from which the Lease is read and claimed again

    def due_in(self) -> float:
        return max(0.0, self._due_at - asyncio.get_running_loop().time())

    async def view(self, fresh: bool = False) -> LeaseView:
        """What a plan is shown: the last known state, and the Lease as it is now when a claim is due or
        ``fresh`` asks (a node about to be taken: the Lease may be gone, or held by another, since last read)."""
        if self.known is not None and self.due_in() > 0 and not fresh:
            return LeaseView(self.namespace, self.node_name, self.known)
        try:
            read = await self.kube.get(self.path)
        except (Forbidden, Invalid) as error:
            self.remember(self._problem(error))
            return LeaseView(self.namespace, self.node_name, self.known)
        return LeaseView(self.namespace, self.node_name, self.known, due=True, read=read)

    def remember(self, state: LeaseState) -> None:
        self.known = state
        self._due_at = asyncio.get_running_loop().time() + (state.recheck_in or 0)

    async def write(self, claim: LeaseClaim) -> LeaseState:
        """Carry a plan's claim out; what it met."""
        try:
            if claim.create:
                await self._create(claim.body)
            else:
                await self.kube.request("PUT", self.path, body=claim.body)  # resourceVersion: a compare-and-swap
        except Conflict:  # another holder wrote it meanwhile: look again at once
            return LeaseState(self.namespace, self.node_name, problem="the Lease changed while we wrote it", recheck_in=0.5, raced=True)
        except (Forbidden, Invalid) as error:
            return self._problem(error)
        return LeaseState(self.namespace, self.node_name, recheck_in=renew_after(claim))

    def _problem(self, error: Forbidden | Invalid) -> LeaseState:
        # Invalid: no Lease can have this name (node-<name> is longer than a name may be).
        kind = "forbidden" if isinstance(error, Forbidden) else "invalid"
        return LeaseState(self.namespace, self.node_name, problem=f"{kind}: {error.message}", recheck_in=FORBIDDEN_RECHECK_SECONDS)

    async def _create(self, body: dict[str, Any]) -> None:
        create = lease_path(self.namespace)
        try:
            await self.kube.request("POST", create, body=body)
        except NotFound:  # the shared namespace does not exist yet: create it, as medik8s operators do
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
            try:
                await self.kube.request("POST", NAMESPACES, body=namespace)
            except Conflict:
                pass  # created by someone else meanwhile
            await self.kube.request("POST", create, body=body)

    async def release(self) -> None:
        """Delete the Lease if we hold it; a Lease another holder took over stays theirs."""
        self.known, self._due_at = None, 0.0
        try:
            lease = await self.kube.get(self.path)
            if lease is None or lease_rules.holder_of(lease) != HOLDER_IDENTITY:
                return
            preconditions = {"uid": lease["metadata"]["uid"], "resourceVersion": lease["metadata"]["resourceVersion"]}
            await self.kube.request("DELETE", self.path, body={"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": preconditions})
        except (NotFound, Conflict):
            return  # gone, or changed hands meanwhile
        except ApiError as error:
            log.warning("could not release the remediation Lease %s: %s", self.path, error)
