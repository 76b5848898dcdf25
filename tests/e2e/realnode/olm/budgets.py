"""Watch a namespace's PodDisruptionBudgets for as long as a test runs, and keep every moment one was violated."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from devcluster.cluster import Cluster


def violated(budget: dict[str, Any]) -> bool:
    """A budget the disruption controller has counted has fewer healthy pods than it must keep."""
    status = budget.get("status") or {}
    if status.get("observedGeneration") != budget["metadata"].get("generation"):
        return False
    return bool(status.get("currentHealthy", 0) < status.get("desiredHealthy", 0))


class BudgetWatch:
    """``kubectl get pdb --watch`` in the background: ``events`` counts what it saw, ``violations`` what broke."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.events = 0
        self.violations: list[dict[str, Any]] = []
        self._process = subprocess.Popen(
            [str(cluster.bin["kubectl"]), f"--kubeconfig={cluster.kubeconfig}", "get", "pdb", "-n", namespace,
             "--watch", "--output-watch-events", "-o", "json"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for budget in _objects(self._process.stdout):
            self.events += 1
            if violated(budget):
                self.violations.append({"name": budget["metadata"]["name"], "status": budget["status"]})

    def stop(self) -> None:
        self._process.terminate()
        self._process.wait(timeout=10)
        self._reader.join(timeout=10)


def _objects(stream: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The objects of a stream of watch events printed as JSON, one after another."""
    decoder, buffer = json.JSONDecoder(), ""
    for line in stream:
        buffer += line
        try:
            event, end = decoder.raw_decode(buffer.lstrip())
        except json.JSONDecodeError:
            continue
        buffer = buffer.lstrip()[end:]
        yield event["object"]
