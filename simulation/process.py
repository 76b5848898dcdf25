"""One operator process in the simulation: the operator's own runtime (the drain engines, their executor, the
policies, the shared watches, the kopf handlers) wired as ``runtime.main`` wires it, against the simulated API.

kopf itself speaks HTTP, so its part is played here by its contract, as the handlers rely on it: a finalizer put on
every NodeMaintenance; ``handlers.changed`` on every change, the deletion included;
``handlers.remove`` on deletion, called again after a ``kopf.TemporaryError``'s delay until it returns, and the
finalizer removed then. The engines are the operator's own (``runtime.maintenances``). A process stopped (a crash, a
restart, a lost lease) ends every task at once and writes nothing more.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import kopf

from node_maintenance.api import HUB
from node_maintenance.api.paths import nm_path
from node_maintenance.client.errors import KubeError, NotFound
from node_maintenance.client.watch import Mirror
from node_maintenance.runtime import handlers
from node_maintenance.runtime.budget_watch import BudgetWatch
from node_maintenance.runtime.cordoned import CordonedNodes
from node_maintenance.runtime.engine import Shared
from node_maintenance.runtime.maintenances import FINALIZER, Maintenances
from node_maintenance.runtime.metrics import Active
from node_maintenance.runtime.policies.view import Policies
from simulation.apiserver import SimulatedApi

NAMESPACE = "node-maintenance-operator"
# How soon kopf calls a handler again after an error that is not a TemporaryError with a delay of its own.
RETRY_SECONDS = 60.0
# How long a task may take to end once cancelled: one that takes longer ignores its cancellation, a defect.
STOP_SECONDS = 10.0
log = logging.getLogger(__name__)


@dataclass
class Kept:
    """One NodeMaintenance as kopf keeps it: its body (kept current), the write of its finalizer and its deletion."""

    body: dict[str, Any]
    finalizing: asyncio.Task[bool] | None = None
    deletion: asyncio.Task[None] | None = None


class Process:
    """The operator's runtime on the simulated API, until :meth:`stop`."""

    def __init__(self, api: SimulatedApi) -> None:
        self.api = api
        self.policies = Policies(api, NAMESPACE, self._tell)
        self.shared = Shared(api, BudgetWatch(api), CordonedNodes(api), Active(), HUB, self._event, policies=self.policies)
        self.maintenances = Maintenances(self.shared)
        self.memo = handlers.Memo(self.shared, self.maintenances)
        self.kept: dict[str, Kept] = {}
        self.events: list[tuple[str, str, str]] = []  # (type, reason, message) of every event the operator posted
        self.mirror = Mirror(api, nm_path(), self._changed, from_cache=False)
        self.tasks: list[asyncio.Task[Any]] = []
        self.unstoppable: list[str] = []  # the tasks that did not end when the process stopped

    def start(self) -> None:
        self.tasks = [asyncio.create_task(self.policies.run(), name="policies"), asyncio.create_task(self.mirror.run(), name="kopf's watch"),
                      asyncio.create_task(self.maintenances.run(), name="drains")]

    async def stop(self) -> None:
        """Every task ends now, as when the process is killed."""
        tasks = [*self.tasks, *(t for k in self.kept.values() for t in (k.finalizing, k.deletion) if t is not None),
                 *(r.task for r in self.maintenances.running.values() if r.task is not None)]
        for task in tasks:
            task.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=STOP_SECONDS)
            self.unstoppable = sorted(t.get_name() for t in pending)
        await self.shared.budgets.stop()
        await self.shared.cordoned.stop()

    # ------------------------------------------------ runtime.main's wiring
    def _tell(self, names: Collection[str] | None) -> None:
        self.maintenances.tell(names)

    def _event(self, _obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))

    # ------------------------------------------------ kopf's contract
    def _changed(self, key: str | None) -> None:
        names = [k.removeprefix("/") for k in self.mirror.objects] if key is None else [key.removeprefix("/")]
        for name in names:
            body = self.mirror.objects.get(f"/{name}")
            kept = self.kept.get(name)
            if body is None:  # gone: its last state is told
                if kept is not None:
                    self.kept.pop(name)
                    self._handle(kept.body, "DELETED")
                continue
            if kept is None:
                kept = self.kept[name] = Kept(body=dict(body))
            else:
                kept.body.clear()
                kept.body.update(body)
            self._handle(kept.body, "MODIFIED")
            finalizers = kept.body["metadata"].get("finalizers") or []
            if FINALIZER not in finalizers and not kept.body["metadata"].get("deletionTimestamp") and kept.finalizing is None:
                kept.finalizing = asyncio.create_task(self._finalized(kept, name), name=f"finalizer {name}")
            if body["metadata"].get("deletionTimestamp") and kept.deletion is None:
                kept.deletion = asyncio.create_task(self._delete(kept, name), name=f"deletion {name}")

    async def _finalized(self, kept: Kept, name: str) -> bool:
        return await self._until_written(kept, name, lambda: _with(kept.body["metadata"].get("finalizers") or [], FINALIZER))

    def _handle(self, body: dict[str, Any], event: str) -> None:
        """``handlers.changed``, as kopf calls it for every event: at once, with a copy of the body as the event showed it."""
        self.tasks.append(asyncio.create_task(handlers.changed(body=dict(body), memo=self.memo, type=event)))  # type: ignore[arg-type]  # kopf's Body is a mapping

    async def _delete(self, kept: Kept, name: str) -> None:
        if FINALIZER not in (kept.body["metadata"].get("finalizers") or []):
            return
        while True:
            try:
                await handlers.remove(body=kept.body, memo=self.memo)  # type: ignore[arg-type]
                break
            except kopf.TemporaryError as error:
                await asyncio.sleep(error.delay or RETRY_SECONDS)
            except KubeError as error:  # kopf logs it and calls again later
                log.warning("deletion handler of %s failed: %s", name, error)
                await asyncio.sleep(RETRY_SECONDS)
            except Exception:  # as kopf does, with its traceback: nobody foresaw it
                log.exception("deletion handler of %s failed", name)
                await asyncio.sleep(RETRY_SECONDS)
        await self._until_written(kept, name, lambda: [f for f in kept.body["metadata"].get("finalizers") or [] if f != FINALIZER])

    async def _until_written(self, kept: Kept, name: str, finalizers: Callable[[], list[str]]) -> bool:
        """kopf's own writes (its finalizer: ``finalizers()``, the list wanted, from the body as it stands) on ``kept``,
        tried again until the API takes them, or until the object is gone: kopf's patch_obj takes a 404 for an object
        deleted meanwhile, and kopf writes to an object only while it handles that object. Each write is conditional on
        the resourceVersion of the body it was made from, as kopf's is (its JSON patch opens with a ``test`` op), so a
        write carried out late, or retried, never lands on a NodeMaintenance of the name made since (seeds 1373037640 of
        Rolling and 1886062486 of Late: its finalizer stripped, and the node it then took never given back). Where kopf
        meets a 422 and tries again on its next cycle (the next event), this meets a 409 and tries again each second, on
        the body as the watch keeps it. False when the object was gone."""
        uid = kept.body["metadata"].get("uid")
        while self.kept.get(name) is kept and kept.body["metadata"].get("uid") == uid:
            try:
                await self.api.patch(nm_path(name), {"metadata": {"finalizers": finalizers() or None,
                                                                  "resourceVersion": kept.body["metadata"]["resourceVersion"]}})
                return True
            except NotFound:
                return False
            except KubeError as error:
                log.info("kopf's write failed, trying again: %s", error)
                await asyncio.sleep(1.0)
        return False


def _with(finalizers: list[str], finalizer: str) -> list[str]:
    """``finalizers`` with ``finalizer`` in it, once: a retry after an answer lost adds nothing (kopf's block_deletion)."""
    return finalizers if finalizer in finalizers else [*finalizers, finalizer]
