"""Leader election with a coordination.k8s.io Lease, with the guarantees client-go's elector gives.

Why a Lease and not kopf's peering: it is a built-in API (no extra CRD in the bundle), every
Kubernetes tool understands it, and only the holder reconciles.

- Expiry is judged from when this replica last saw the Lease's record change, on its own monotonic
  clock (:func:`lease.observe`): no clock skew lets a standby take a Lease its holder still renews.
- A renewal is tried every ``LEADER_RETRY_SECONDS``, and every request of an attempt ends by the
  renewal deadline, waiting at most half of it at each step: one hung connection does not cost the
  lead. A holder that has not renewed for ``LEADER_RENEW_DEADLINE_SECONDS`` gives the lead up, 5 s
  before any other replica can see the Lease expire: its caller refuses every write of that
  reconciler from then on (``AsyncKube.may_write``, kopf's session too), and stops it.
- The elector has a thread of its own: admission reviews on the default pool cannot starve it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from node_maintenance.api import timestamps
from node_maintenance.api.paths import lease_path
from node_maintenance.client.errors import Conflict, KubeError, NotFound, Unreachable
from node_maintenance.client.protocol import BlockingKubeApi
from node_maintenance.coordination import lease_rules

LEASE_NAME = "node-maintenance-operator-lock"
LEADER_LEASE_SECONDS = 15
LEADER_RENEW_DEADLINE_SECONDS = 10
LEADER_RETRY_SECONDS = 2
# How long one request of an attempt waits for the server at each step (connecting, each read), as client-go's
# resourcelock.NewFromKubeconfig bounds it: a request hung on a dead connection leaves time for another attempt
# before the renewal deadline.
LEADER_REQUEST_SECONDS = max(1.0, LEADER_RENEW_DEADLINE_SECONDS / 2)
log = logging.getLogger(__name__)


class LeaderElector:
    def __init__(self, kube: BlockingKubeApi, namespace: str, identity: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.kube = kube
        self.namespace = namespace
        self.path = lease_path(namespace, LEASE_NAME)
        self.identity = identity
        self.clock = clock
        self.observed: lease_rules.Observed | None = None
        self._thread = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="leader-election")

    def try_acquire_or_renew(self, deadline: float) -> bool:
        """One attempt to take or keep the Lease; each of its requests ends by ``deadline`` (on ``clock``)."""
        lease = self._call("GET", self.path, deadline)
        self.observed = lease_rules.observe(self.observed, lease, self.clock())
        if lease is not None and lease_rules.held_by_other(self.observed, self.identity, self.clock()):
            return False
        body = lease_rules.claimed(lease, self.identity, LEADER_LEASE_SECONDS, timestamps.now(), {"name": LEASE_NAME})
        try:
            # A PUT carries the resourceVersion read: a compare-and-swap.
            written = self._call("POST", lease_path(self.namespace), deadline, body) if lease is None else self._call("PUT", self.path, deadline, body)
        except (Conflict, NotFound):  # another replica won the race, or the Lease went meanwhile
            return False
        self.observed = lease_rules.observe(self.observed, written, self.clock())
        return True

    def release(self) -> None:
        """Give the Lease up on a clean shutdown so another replica takes over at once, not after it expires."""
        deadline = self.clock() + LEADER_RENEW_DEADLINE_SECONDS
        try:
            lease = self._call("GET", self.path, deadline)
            if lease and lease_rules.holder_of(lease) == self.identity:
                lease["spec"]["holderIdentity"] = ""
                self._call("PUT", self.path, deadline, lease)
        except KubeError as error:
            log.warning("could not release the lease: %s", error)

    def _call(self, method: str, path: str, deadline: float, body: Any = None) -> dict[str, Any] | None:
        """A request that ends by ``deadline`` and waits at most ``LEADER_REQUEST_SECONDS`` at each step; a GET of a
        missing Lease is None."""
        left = deadline - self.clock()
        if left <= 0:
            raise Unreachable(f"{method} {path}: the renewal deadline passed")
        try:
            return self.kube.request(method, path, body=body, timeout=min(left, LEADER_REQUEST_SECONDS))
        except NotFound:
            if method == "GET":
                return None
            raise

    async def _attempt(self, deadline: float) -> bool:
        """An attempt in the elector's thread, given up at ``deadline`` even if a request is still stuck there."""
        attempt = asyncio.get_running_loop().run_in_executor(self._thread, self.try_acquire_or_renew, deadline)
        try:
            # Not asyncio.wait_for: Python 3.11's loses a cancellation that comes as the attempt ends (gh-86296), and
            # a hold() cancelled at shutdown would then renew the Lease on and on.
            async with asyncio.timeout(max(0.0, deadline - self.clock())):
                return await attempt
        except TimeoutError:
            log.warning("lease renewal failed: no answer by the deadline")
        except KubeError as error:  # the apiserver may be briefly unreachable
            log.warning("lease renewal failed: %s", error)
        return False

    async def acquire(self) -> None:
        """Return once this replica holds the Lease; an API server out of reach is waited for."""
        log.info("waiting for leadership", extra={"lease": LEASE_NAME, "identity": self.identity})
        while not await self._attempt(self.clock() + LEADER_RENEW_DEADLINE_SECONDS):  # noqa: ASYNC110 - the Lease lives on the API server: no local event to wait on
            # Jittered as client-go does, so that standbys do not all ask at once.
            await asyncio.sleep(LEADER_RETRY_SECONDS * (1 + 0.2 * random.random()))
        log.info("became leader", extra={"lease": LEASE_NAME, "identity": self.identity})

    async def hold(self) -> None:
        """Renew until no renewal has succeeded for ``LEADER_RENEW_DEADLINE_SECONDS``, then return: the caller
        must stop acting before the Lease can expire for the other replicas."""
        renewed = started = self.clock()  # renewed: when the last successful attempt began; the Lease holds until then plus its duration
        while True:
            # Attempts begin every LEADER_RETRY_SECONDS from the last one's start, as client-go's ticker begins them:
            # after one that took its requests' bound, the next begins at once.
            await asyncio.sleep(max(0.0, started + LEADER_RETRY_SECONDS - self.clock()))
            started = self.clock()
            if await self._attempt(renewed + LEADER_RENEW_DEADLINE_SECONDS):
                renewed = started
            elif self.clock() >= renewed + LEADER_RENEW_DEADLINE_SECONDS:
                log.error("lost leadership", extra={"lease": LEASE_NAME})
                return
