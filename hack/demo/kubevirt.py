"""A virtual machine as KubeVirt runs it, mimicked without KubeVirt: its virt-launcher pod, the budget
that keeps the VM up, and KubeVirt's answer to the ``kubevirt.io/drain`` taint, a live migration.

Without KubeVirt's CRDs the pod cannot be owned by a VirtualMachineInstance, so it is a bare pod with
virt-launcher's labels, and its own PodDisruptionBudget (minAvailable 1), as KubeVirt gives each VM.
That budget never lets the only pod go: the node stays held until the VM has moved. ``Migration``
plays KubeVirt's part: once the node carries the taint it starts the migration target pod on another
worker; with two pods the budget allows one disruption, and the operator evicts the source.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable
from typing import Any

from devcluster.cluster import Cluster
from node_maintenance.drain import nodes

from .workload import budget, ready, worker_spec

NAMESPACE = "vms"
VM = "rhel9-vm"
SOURCE = f"virt-launcher-{VM}-7xk2p"
TARGET = f"virt-launcher-{VM}-q9wtr"
BUDGET = f"kubevirt-disruption-budget-{VM}"
LABELS = {"kubevirt.io": "virt-launcher", "vm.kubevirt.io/name": VM}
MIN_AVAILABLE = 1  # the VM stays up: its only pod never goes before a migration target runs
MIGRATION_SECONDS = 5.0  # what copying the VM's memory takes here; long enough to see the budget hold


def describe() -> str:
    return (f"In namespace {NAMESPACE}: a pod shaped like the virt-launcher pod of KubeVirt VM {VM} (its labels; "
            "KubeVirt's CRDs are not installed, so it has no VirtualMachineInstance owner) under the PodDisruptionBudget "
            f"KubeVirt gives a VM, {BUDGET} (minAvailable {MIN_AVAILABLE}). When the node is drained, the demo plays KubeVirt's part.")


def launcher(name: str, node: str | None = None, **labels: str) -> dict[str, Any]:
    spec = worker_spec("compute", **({"nodeName": node} if node else {}))
    return {"apiVersion": "v1", "kind": "Pod", "spec": spec,
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {**LABELS, **labels},
                         "annotations": {"kubevirt.io/domain": VM}}}


def objects(node: str) -> list[dict[str, Any]]:
    """The VM's namespace, its virt-launcher pod on ``node`` and its budget."""
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            launcher(SOURCE, node), budget(BUDGET, NAMESPACE, {"vm.kubevirt.io/name": VM}, {"minAvailable": MIN_AVAILABLE})]


class Migration(threading.Thread):
    """Waits for the drain taint on ``node``, then live-migrates the VM; says what it does in ``said``."""

    def __init__(self, cluster: Cluster, node: str) -> None:
        super().__init__(name="kubevirt-migration", daemon=True)
        self.cluster = cluster
        self.node = node
        self.said: queue.Queue[str] = queue.Queue()
        self.error: BaseException | None = None
        self._done = threading.Event()

    def run(self) -> None:
        try:
            self._migrate()
        except BaseException as error:  # surfaced by the thread that watches the drain
            self.error = error

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=10)

    def _get(self, *args: str) -> dict[str, Any]:
        got: dict[str, Any] = json.loads(self.cluster.kubectl("get", *args, "-o", "json").stdout)
        return got

    def _until(self, check: Callable[[], bool]) -> bool:
        while not self._done.is_set():
            if check():
                return True
            self._done.wait(0.5)
        return False

    def _migrate(self) -> None:
        if not self._until(lambda: nodes.has_taint(self._get("node", self.node))):
            return
        self.said.put(f"KubeVirt sees {nodes.TAINT['key']} on {self.node} and live-migrates {VM} to another worker")
        if self._done.wait(MIGRATION_SECONDS):
            return
        target = launcher(TARGET, **{"kubevirt.io/migrationTarget": "true"})
        self.cluster.kubectl("apply", "-f", "-", input=json.dumps(target))
        if self._until(lambda: ready([self._get("pod", TARGET, "-n", NAMESPACE)]) == 1):
            where = self._get("pod", TARGET, "-n", NAMESPACE)["spec"]["nodeName"]
            self.said.put(f"{VM} now runs in {NAMESPACE}/{TARGET} on {where}: its budget lets the source pod go")
