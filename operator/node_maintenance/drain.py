"""One pass of a drain: list the node's pods, evict (or delete) those that must go, report what is left.

Evictions go through the policy/v1 Eviction subresource so PodDisruptionBudgets hold. Pods are
evicted concurrently; a pod refused with 429 is tried again only after ``RETRY_SECONDS``.
The node's pods are listed by field selector each pass: nothing watches or caches pods cluster-wide.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.exceptions import ApiException

from . import metrics, pods
from .kube import Kube, pod_path

RETRY_SECONDS = 5.0


@dataclass
class PassResult:
    total: int
    to_go: list[dict[str, Any]]
    blocked: dict[str, list[str]] = field(default_factory=dict)  # pod ref -> PDB names refusing it
    errors: dict[str, str] = field(default_factory=dict)  # pod ref -> error

    @property
    def pending(self) -> list[tuple[str, str]]:
        return [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in self.to_go]

    def error_text(self) -> str:
        parts = [f"{pod} waits on PodDisruptionBudget {', '.join(pdbs) or '(unknown)'}" for pod, pdbs in sorted(self.blocked.items())]
        parts += [f"{pod}: {error}" for pod, error in sorted(self.errors.items())]
        return "; ".join(parts)


class Drainer:
    """Drains one node; remembers per pod when it may be tried again."""

    def __init__(self, kube: Kube, node_name: str) -> None:
        self.kube = kube
        self.node_name = node_name
        self._next_try: dict[str, float] = {}  # pod uid -> monotonic time
        self._blocked: dict[str, list[str]] = {}
        self._errors: dict[str, str] = {}

    def list_pods(self) -> list[dict[str, Any]]:
        return self.kube.request("GET", "/api/v1/pods", query={"fieldSelector": f"spec.nodeName={self.node_name}"})["items"]

    async def run_pass(self, selector: dict[str, Any] | None, grace: int | None, *, evict: bool = True) -> PassResult:
        listed = await asyncio.to_thread(self.list_pods)
        to_go = [p for p in listed if pods.must_go(p, selector)]
        live = {p["metadata"]["uid"] for p in to_go}
        self._next_try = {uid: at for uid, at in self._next_try.items() if uid in live}
        now = time.monotonic()
        due = [
            p for p in to_go
            if evict and not p["metadata"].get("deletionTimestamp") and self._next_try.get(p["metadata"]["uid"], 0) <= now
        ]
        await asyncio.gather(*(asyncio.to_thread(self._remove, p, selector, grace) for p in due))
        refs = {pods.ref(p) for p in to_go}
        self._blocked = {k: v for k, v in self._blocked.items() if k in refs}
        self._errors = {k: v for k, v in self._errors.items() if k in refs}
        return PassResult(total=len(listed), to_go=to_go, blocked=dict(self._blocked), errors=dict(self._errors))

    def _remove(self, pod: dict[str, Any], selector: dict[str, Any] | None, grace: int | None) -> None:
        meta = pod["metadata"]
        ref = pods.ref(pod)
        self._next_try[meta["uid"]] = time.monotonic() + RETRY_SECONDS
        preconditions = {"uid": meta["uid"]}  # never act on a replacement that reused the name
        try:
            if pods.classify(pod, selector) is pods.Action.DELETE_FINISHED:
                body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": preconditions}
                if grace is not None:
                    body["gracePeriodSeconds"] = grace
                self.kube.request("DELETE", pod_path(meta["namespace"], meta["name"]), body=body)
                metrics.EVICTIONS.labels(result="deleted").inc()
            else:
                options: dict[str, Any] = {"preconditions": preconditions}
                if grace is not None:
                    options["gracePeriodSeconds"] = grace
                eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": meta["name"], "namespace": meta["namespace"]}, "deleteOptions": options}
                self.kube.request("POST", pod_path(meta["namespace"], meta["name"]) + "/eviction", body=eviction)
                metrics.EVICTIONS.labels(result="evicted").inc()
            self._blocked.pop(ref, None)
            self._errors.pop(ref, None)
        except ApiException as error:
            if error.status in (404, 409):  # gone, or replaced: the next listing tells
                return
            if error.status == 429:
                metrics.EVICTIONS.labels(result="blocked").inc()
                self._blocked[ref] = self._budgets_for(pod)
                self._errors.pop(ref, None)
            else:
                metrics.EVICTIONS.labels(result="error").inc()
                self._errors[ref] = f"eviction failed ({error.status}): {error.reason}"

    def _budgets_for(self, pod: dict[str, Any]) -> list[str]:
        namespace = pod["metadata"]["namespace"]
        labels = pod["metadata"].get("labels") or {}
        budgets = self.kube.request("GET", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets")["items"]
        # policy/v1: a budget without a selector selects nothing; an empty selector selects every pod.
        return sorted(
            f"{namespace}/{b['metadata']['name']}"
            for b in budgets
            if b["spec"].get("selector") is not None and pods.matches_selector(labels, b["spec"]["selector"])
        )
