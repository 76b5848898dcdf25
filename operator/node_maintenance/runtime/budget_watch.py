"""Every PodDisruptionBudget, watched once for all drains, and the evictions sent that budgets have
not counted yet.

A budget's ``disruptionsAllowed`` drops when the Eviction API accepts an eviction (it lists the pod
under ``disruptedPods``); until the watch shows that, an eviction we sent still counts against the
budget here, so no drain sends more evictions than a budget allows at that moment. A deletion past the
budget (an escalation step) lowers it only once the disruption controller has counted the pod gone, and
the budget's status shows nothing that tells that count apart from the Eviction API's own writes (each
accepted eviction writes it too): such a deletion counts here for IN_FLIGHT_SECONDS.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from node_maintenance.client.protocol import KubeApi
from node_maintenance.client.watch import Mirror, without_managed_fields
from node_maintenance.drain.budgets import InFlight

PATH = "/apis/policy/v1/poddisruptionbudgets"
# An eviction the watch never shows counted (a lost event) stops holding its budget after this long; a deletion past
# the budget holds it this long.
IN_FLIGHT_SECONDS = 10.0
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sent:
    """A removal counted against a budget: when it was sent, and whether it was a deletion past the budget (else an
    eviction, which the budget lists under ``disruptedPods`` once accepted)."""

    at: float
    bypassing: bool


class BudgetWatch:
    def __init__(self, kube: KubeApi) -> None:
        self.mirror = Mirror(kube, PATH, self._changed, slim=self._arrived)
        # listener -> the namespaces whose budgets it reads
        self._listeners: dict[Callable[[], None], Callable[[], Collection[str]]] = {}
        self._sent: dict[str, dict[str, Sent]] = {}  # budget namespace/name -> pod name -> its removal, counted
        self._task: asyncio.Task[None] | None = None

    def subscribe(self, listener: Callable[[], None], namespaces: Callable[[], Collection[str]]) -> None:
        """Call ``listener`` when a budget changes in one of ``namespaces()`` (a drain reads its node's pods'
        budgets only: twenty drains are not all woken by each budget); starts the watch with the first subscriber."""
        self._listeners[listener] = namespaces
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self.mirror.run(), name="budget watch")

    def unsubscribe(self, listener: Callable[[], None]) -> None:
        self._listeners.pop(listener, None)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def in_namespaces(self, namespaces: set[str]) -> list[dict[str, Any]]:
        return [b for namespace in sorted(namespaces) for b in self.mirror.in_namespace(namespace)]

    def sent(self, budget: str, pod: str, *, bypassing: bool = False) -> None:
        """An eviction of ``pod`` sent, or its deletion past ``budget`` (``bypassing``)."""
        self._sent.setdefault(budget, {})[pod] = Sent(asyncio.get_running_loop().time(), bypassing)

    def returned(self, budget: str, pod: str) -> None:
        """The removal was refused or never sent: it does not count against the budget."""
        self._sent.get(budget, {}).pop(pod, None)

    def in_flight(self) -> dict[str, InFlight]:
        self._forget()
        now = asyncio.get_running_loop().time()
        return {budget: InFlight(len(pods), IN_FLIGHT_SECONDS - (now - min(s.at for s in pods.values()))) for budget, pods in self._sent.items()}

    def _forget(self) -> None:
        now = asyncio.get_running_loop().time()
        for budget, pods in list(self._sent.items()):
            counted = (self.mirror.objects.get(budget, {}).get("status") or {}).get("disruptedPods") or {}
            for pod, sent in list(pods.items()):
                if (pod in counted and not sent.bypassing) or now - sent.at >= IN_FLIGHT_SECONDS:  # at the bound, not after: it would be due again at once
                    del pods[pod]
            if not pods:
                del self._sent[budget]

    def _arrived(self, budget: dict[str, Any]) -> dict[str, Any]:
        """Each budget as a listing or a watch event brings it: at DEBUG, when the drains could first know a
        budget allows an eviction again (`make bench` times the drain's waves by these lines)."""
        if log.isEnabledFor(logging.DEBUG):
            log.debug("budget seen", extra={"budget": f"{budget['metadata'].get('namespace')}/{budget['metadata']['name']}",
                                            "resourceVersion": budget["metadata"].get("resourceVersion"),
                                            "disruptionsAllowed": (budget.get("status") or {}).get("disruptionsAllowed")})
        return without_managed_fields(budget)

    def _changed(self, key: str | None) -> None:
        self._forget()
        namespace = key.split("/", 1)[0] if key is not None else None
        for listener, namespaces in list(self._listeners.items()):
            if namespace is None or namespace in namespaces():
                listener()
