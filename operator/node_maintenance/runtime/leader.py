"""Leader election with a coordination.k8s.io Lease, the way controller-runtime does it.

Why a Lease and not kopf's peering: it is a built-in API (no extra CRD in the bundle), every
Kubernetes tool understands it, and it gives the same guarantee controller-runtime operators give:
only the holder reconciles, and a holder that cannot renew in time stops itself.
"""

from __future__ import annotations

import asyncio
import logging
import socket

from node_maintenance.api import timestamps
from node_maintenance.api.paths import lease_path
from node_maintenance.client.errors import ApiError, Conflict, KubeError, NotFound
from node_maintenance.client.http import Kube
from node_maintenance.coordination import lease as leases

LEASE_NAME = "node-maintenance-operator-lock"
LEADER_LEASE_SECONDS = 15
LEADER_RENEW_SECONDS = 5
log = logging.getLogger(__name__)


class LeaderElector:
    def __init__(self, kube: Kube, namespace: str, identity: str | None = None) -> None:
        self.kube = kube
        self.namespace = namespace
        self.path = lease_path(namespace, LEASE_NAME)
        # In a pod the hostname is the pod name: a restarted container keeps its claim, another replica does not.
        self.identity = identity or socket.gethostname()

    def try_acquire_or_renew(self) -> bool:
        now = timestamps.now()
        lease = self.kube.get(self.path)
        if lease is not None and leases.holder_of(lease) != self.identity and not leases.expired(lease, now):
            return False
        body = leases.claimed(lease, self.identity, LEADER_LEASE_SECONDS, now, {"name": LEASE_NAME})
        try:
            if lease is None:
                self.kube.request("POST", lease_path(self.namespace), body=body)
            else:
                self.kube.request("PUT", self.path, body=body)  # resourceVersion makes this a compare-and-swap
            return True
        except (Conflict, NotFound):  # another replica won the race, or the Lease went meanwhile
            return False

    def release(self) -> None:
        """Give the Lease up on a clean shutdown so another replica takes over at once, not after it expires."""
        lease = self.kube.get(self.path)
        if lease and leases.holder_of(lease) == self.identity:
            lease["spec"]["holderIdentity"] = ""
            try:
                self.kube.request("PUT", self.path, body=lease)
            except ApiError as error:
                log.warning("could not release the lease: %s", error)

    async def _attempt(self) -> bool:
        try:
            return await asyncio.to_thread(self.try_acquire_or_renew)
        except KubeError as error:  # the apiserver may be briefly unreachable
            log.warning("lease renewal failed: %s", error)
            return False

    async def acquire(self) -> None:
        """Return once this replica holds the Lease; an API server out of reach is waited for."""
        log.info("waiting for leadership", extra={"lease": LEASE_NAME, "identity": self.identity})
        while not await self._attempt():  # noqa: ASYNC110 - the Lease lives on the API server: no local event to wait on
            await asyncio.sleep(LEADER_RENEW_SECONDS / 2)
        log.info("became leader", extra={"lease": LEASE_NAME, "identity": self.identity})

    async def hold(self) -> None:
        """Renew until renewal has failed for a whole lease duration, then return (the caller must stop)."""
        last_ok = asyncio.get_running_loop().time()
        while True:
            await asyncio.sleep(LEADER_RENEW_SECONDS)
            if await self._attempt():
                last_ok = asyncio.get_running_loop().time()
                continue
            if asyncio.get_running_loop().time() - last_ok > LEADER_LEASE_SECONDS - LEADER_RENEW_SECONDS:
                log.error("lost leadership", extra={"lease": LEASE_NAME})
                return
