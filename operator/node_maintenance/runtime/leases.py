"""The remediation Lease of one node at run time: the few requests that take, renew and release it.

The rules (who holds a Lease, the record we write) are ``coordination.lease`` and
``coordination.remediation``; this keeper remembers when to look again, so a held Lease costs one
request per renewal period.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from node_maintenance.api import timestamps
from node_maintenance.api.paths import NAMESPACES, lease_path
from node_maintenance.client.errors import ApiError, Conflict, Forbidden, Invalid, NotFound
from node_maintenance.client.http import AsyncKube
from node_maintenance.coordination import lease as leases
from node_maintenance.coordination.remediation import (
    FORBIDDEN_RECHECK_SECONDS,
    HOLDER_IDENTITY,
    LEASE_HELD_RECHECK_SECONDS,
    RENEW_AFTER_SECONDS,
    LeaseState,
    claimed,
    lease_name,
    other_holder,
)

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Holds, renews and releases the Lease of one node; at most one request per renewal period once held."""

    def __init__(self, kube: AsyncKube, namespace: str, node_name: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.node_name = node_name
        self.path = lease_path(namespace, lease_name(node_name))
        self._last: tuple[LeaseState, float] | None = None  # what the last look found, and until when (monotonic) it stands

    async def hold(self, node: dict[str, Any]) -> LeaseState:
        """Take or renew the Lease unless another holder owns it; between looks, what the last one found."""
        clock = time.monotonic()
        if self._last and clock < self._last[1]:
            return replace(self._last[0], recheck_in=self._last[1] - clock)
        state = await self._look(node)
        self._last = (state, time.monotonic() + (state.recheck_in or 0))
        return state

    async def _look(self, node: dict[str, Any]) -> LeaseState:
        now = timestamps.now()
        try:
            lease = await self.kube.get(self.path)
            holder = other_holder(lease, now)
            if holder:
                due = leases.expires_at(lease)
                wait = LEASE_HELD_RECHECK_SECONDS if due is None else min(LEASE_HELD_RECHECK_SECONDS, max(0.5, (due - now).total_seconds()))
                return LeaseState(self.namespace, self.node_name, other=holder, recheck_in=wait)
            body = claimed(lease, node, self.namespace, now)
            if lease is None:
                await self._create(body)
            else:
                await self.kube.request("PUT", self.path, body=body)  # resourceVersion: a compare-and-swap
        except Conflict:  # another holder wrote it meanwhile: look again at once
            return LeaseState(self.namespace, self.node_name, problem="the Lease changed while we wrote it", recheck_in=0.5)
        except Forbidden as error:
            return LeaseState(self.namespace, self.node_name, problem=f"forbidden: {error.message}", recheck_in=FORBIDDEN_RECHECK_SECONDS)
        except Invalid as error:  # no Lease can have this name: node-<name> is longer than a name may be
            return LeaseState(self.namespace, self.node_name, problem=f"invalid: {error.message}", recheck_in=FORBIDDEN_RECHECK_SECONDS)
        return LeaseState(self.namespace, self.node_name, recheck_in=RENEW_AFTER_SECONDS)

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
        self._last = None
        try:
            lease = await self.kube.get(self.path)
            if lease is None or leases.holder_of(lease) != HOLDER_IDENTITY:
                return
            preconditions = {"uid": lease["metadata"]["uid"], "resourceVersion": lease["metadata"]["resourceVersion"]}
            await self.kube.request("DELETE", self.path, body={"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": preconditions})
        except (NotFound, Conflict):
            return  # gone, or changed hands meanwhile
        except ApiError as error:
            log.warning("could not release the remediation Lease %s: %s", self.path, error)
