"""Leader election with a coordination.k8s.io Lease, the way controller-runtime does it.

Why a Lease and not kopf's peering: it is a built-in API (no extra CRD in the bundle), every
Kubernetes tool understands it, and it gives the same guarantee controller-runtime operators give:
only the holder reconciles, and a holder that cannot renew in time stops itself.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import socket
from typing import Any

from .kube import ApiError, Conflict, Kube, NotFound

LEASE_NAME = "node-maintenance-operator-lock"
LEASE_SECONDS = 15
RENEW_SECONDS = 5
log = logging.getLogger(__name__)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _stamp(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str) -> datetime.datetime:
    return datetime.datetime.strptime(text.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")


def expired(spec: dict[str, Any], now: datetime.datetime) -> bool:
    renewed = spec.get("renewTime")
    if not renewed or not spec.get("holderIdentity"):
        return True
    return _parse(renewed) + datetime.timedelta(seconds=spec.get("leaseDurationSeconds", LEASE_SECONDS)) < now


class LeaderElector:
    def __init__(self, kube: Kube, namespace: str, identity: str | None = None) -> None:
        self.kube = kube
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{LEASE_NAME}"
        self.create_path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        # In a pod the hostname is the pod name: a restarted container keeps its claim, another replica does not.
        self.identity = identity or socket.gethostname()

    def try_acquire_or_renew(self) -> bool:
        now = _now()
        lease = self.kube.get(self.path)
        spec = {"holderIdentity": self.identity, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": _stamp(now)}
        try:
            if lease is None:
                spec["acquireTime"] = _stamp(now)
                body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": LEASE_NAME}, "spec": spec}
                self.kube.request("POST", self.create_path, body=body)
                return True
            current = lease.get("spec") or {}
            if current.get("holderIdentity") != self.identity:
                if not expired(current, now):
                    return False
                spec["acquireTime"] = _stamp(now)
                spec["leaseTransitions"] = current.get("leaseTransitions", 0) + 1
            lease["spec"] = {**current, **spec}
            self.kube.request("PUT", self.path, body=lease)  # resourceVersion makes this a compare-and-swap
            return True
        except (Conflict, NotFound):  # another replica won the race, or the Lease went meanwhile
            return False

    def release(self) -> None:
        """Give the Lease up on a clean shutdown so another replica takes over at once, not after it expires."""
        lease = self.kube.get(self.path)
        if lease and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
            lease["spec"]["holderIdentity"] = ""
            try:
                self.kube.request("PUT", self.path, body=lease)
            except ApiError as error:
                log.warning("could not release the lease: %s", error)

    async def _attempt(self) -> bool:
        try:
            return await asyncio.to_thread(self.try_acquire_or_renew)
        except Exception as error:  # the apiserver may be briefly unreachable
            log.warning("lease renewal failed: %s", error)
            return False

    async def acquire(self) -> None:
        """Return once this replica holds the Lease; an API server out of reach is waited for."""
        log.info("waiting for leadership", extra={"lease": LEASE_NAME, "identity": self.identity})
        while not await self._attempt():
            await asyncio.sleep(RENEW_SECONDS / 2)
        log.info("became leader", extra={"lease": LEASE_NAME, "identity": self.identity})

    async def hold(self) -> None:
        """Renew until renewal has failed for a whole lease duration, then return (the caller must stop)."""
        last_ok = asyncio.get_running_loop().time()
        while True:
            await asyncio.sleep(RENEW_SECONDS)
            if await self._attempt():
                last_ok = asyncio.get_running_loop().time()
                continue
            if asyncio.get_running_loop().time() - last_ok > LEASE_SECONDS - RENEW_SECONDS:
                log.error("lost leadership", extra={"lease": LEASE_NAME})
                return
