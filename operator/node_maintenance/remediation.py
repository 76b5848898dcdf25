"""Coordination with node remediation, the way medik8s operators coordinate with each other.

While a node is in maintenance the operator holds the coordination.k8s.io Lease ``node-<name>`` in a
shared namespace (``medik8s-leases`` unless configured otherwise) and labels the node
``remediation.medik8s.io/exclude-from-remediation=true``. Node Healthcheck and the remediators it
drives do not remediate a node whose Lease another holder owns, nor a node with that label.

Lease semantics follow medik8s' lease manager: a Lease is valid while ``renewTime`` is not in the
future and ``renewTime + leaseDurationSeconds`` is not in the past; an invalid (expired, or never
renewed) Lease may be taken over, which sets ``acquireTime`` and counts a transition; releasing
deletes the Lease. The duration is medik8s' node maintenance operator's, one hour; we renew once
half of it has passed, so a node kept in maintenance for days keeps its Lease, and a Lease left by a
stopped operator frees within the hour (the label keeps protecting the node meanwhile).

Pure functions decide; :class:`LeaseKeeper` does the few requests and remembers when to renew.
"""

from __future__ import annotations

import datetime
import json
import logging
import time
from dataclasses import dataclass, replace
from typing import Any

from .api import GROUP
from .kube import ApiError, AsyncKube, Conflict, Forbidden, Invalid, NotFound

DEFAULT_LEASE_NAMESPACE = "medik8s-leases"
LEASE_NAMESPACE_ENV = "REMEDIATION_LEASE_NAMESPACE"
HOLDER_IDENTITY = "node-maintenance-operator"
LEASE_SECONDS = 3600
RENEW_AFTER_SECONDS = LEASE_SECONDS / 2
# A Lease another holder owns is looked at again this often (or when it expires, if sooner); one we may
# not write (no permission), less often: that changes only with the operator's RBAC.
HELD_RECHECK_SECONDS = 5.0
FORBIDDEN_RECHECK_SECONDS = 60.0
EXCLUDE_LABEL = "remediation.medik8s.io/exclude-from-remediation"
# The label's value before we set it, as JSON (null: it was absent), so the node is given back as it was.
LABEL_BEFORE = f"{GROUP}/exclude-from-remediation-before"
CONDITION = "RemediationLease"

log = logging.getLogger(__name__)


def lease_name(node_name: str) -> str:
    return f"node-{node_name}".lower()


def _parse(text: str) -> datetime.datetime:
    """A MicroTime or Time as the API writes it."""
    text = text.replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(text)


def _stamp(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def expires_at(spec: dict[str, Any]) -> datetime.datetime | None:
    renewed, duration = spec.get("renewTime"), spec.get("leaseDurationSeconds")
    if not renewed or duration is None:
        return None
    return _parse(renewed) + datetime.timedelta(seconds=duration)


def is_valid(spec: dict[str, Any], now: datetime.datetime) -> bool:
    """Whether the Lease holds now: renewed not in the future, and not expired."""
    due = expires_at(spec)
    return due is not None and _parse(spec["renewTime"]) <= now <= due


def other_holder(lease: dict[str, Any] | None, now: datetime.datetime, identity: str = HOLDER_IDENTITY) -> str | None:
    """The holder that owns ``lease`` now, if that is not us; None when we may take or keep it."""
    spec = (lease or {}).get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    if lease is None or holder == identity or not is_valid(spec, now):
        return None
    return holder or "an unnamed holder"


def claimed(lease: dict[str, Any] | None, node: dict[str, Any], namespace: str, now: datetime.datetime,
            identity: str = HOLDER_IDENTITY) -> dict[str, Any]:
    """The Lease as we write it to hold it from ``now``: created, taken over or renewed."""
    stamp = _stamp(now)
    spec = dict((lease or {}).get("spec") or {})
    taken_over = lease is not None and (spec.get("holderIdentity") != identity or spec.get("renewTime") is None)
    spec.update(holderIdentity=identity, leaseDurationSeconds=LEASE_SECONDS, renewTime=stamp)
    if lease is None:
        spec.update(acquireTime=stamp, leaseTransitions=0)
    elif taken_over:
        spec.update(acquireTime=stamp, leaseTransitions=int(spec.get("leaseTransitions") or 0) + 1)
    metadata = dict((lease or {}).get("metadata") or {"name": lease_name(node["metadata"]["name"]), "namespace": namespace})
    metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node["metadata"]["name"], "uid": node["metadata"]["uid"]}]
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}


def held_message(namespace: str, node_name: str, holder: str) -> str:
    return (f"node {node_name!r} is held for remediation: Lease {namespace}/{lease_name(node_name)} belongs to {holder}; "
            "the maintenance takes the node once that holder releases the Lease or it expires")


def exclude(node: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``patch`` (a node begin patch) extended to label the node excluded from remediation.

    The first time, the label's earlier value is recorded, so :func:`restore` gives it back; a record
    already there (an operator restarted, or a maintenance taken over) is the node's original state.
    """
    labels = node.get("metadata", {}).get("labels") or {}
    metadata = patch.setdefault("metadata", {})
    metadata.setdefault("labels", {})[EXCLUDE_LABEL] = "true"
    if LABEL_BEFORE not in (node.get("metadata", {}).get("annotations") or {}):
        metadata.setdefault("annotations", {})[LABEL_BEFORE] = json.dumps(labels.get(EXCLUDE_LABEL))
    return patch


def is_excluded(node: dict[str, Any]) -> bool:
    return (node.get("metadata", {}).get("labels") or {}).get(EXCLUDE_LABEL) == "true"


def restore(node: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``patch`` (a node end patch) extended to put the label back as it was before the maintenance.

    A node we never labelled (no record) keeps its label untouched.
    """
    annotations = node.get("metadata", {}).get("annotations") or {}
    if LABEL_BEFORE not in annotations:
        return patch
    try:
        before = json.loads(annotations[LABEL_BEFORE])
    except ValueError:
        before = None
    metadata = patch.setdefault("metadata", {})
    metadata.setdefault("labels", {})[EXCLUDE_LABEL] = before if isinstance(before, str) else None
    metadata.setdefault("annotations", {})[LABEL_BEFORE] = None
    return patch


@dataclass(frozen=True)
class LeaseState:
    """What holding the Lease met: held by us, held by another, or not possible (``problem``)."""

    namespace: str
    node_name: str
    other: str | None = None  # another holder owns the Lease
    problem: str = ""  # we could not read or write the Lease (RBAC, say): why
    recheck_in: float | None = None

    @property
    def held(self) -> bool:
        return self.other is None and not self.problem

    def condition(self) -> tuple[str, str, str]:
        """(status, reason, message) of the RemediationLease condition."""
        name = f"{self.namespace}/{lease_name(self.node_name)}"
        if self.other:
            return "False", "HeldByAnother", held_message(self.namespace, self.node_name, self.other)
        if self.problem:
            return "False", "LeaseUnavailable", (f"Lease {name} could not be held ({self.problem}); the node carries "
                                                f"{EXCLUDE_LABEL}=true, which remediation also honours")
        return "True", "Held", f"Lease {name} is held as {HOLDER_IDENTITY} while the node is in maintenance"


class LeaseKeeper:
    """Holds, renews and releases the Lease of one node; at most one request per renewal period once held."""

    def __init__(self, kube: AsyncKube, namespace: str, node_name: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.node_name = node_name
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{lease_name(node_name)}"
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
        now = datetime.datetime.now(datetime.timezone.utc)
        try:
            lease = await self.kube.get(self.path)
            holder = other_holder(lease, now)
            if holder:
                due = expires_at(lease["spec"]) if lease else None
                wait = HELD_RECHECK_SECONDS if due is None else min(HELD_RECHECK_SECONDS, max(0.5, (due - now).total_seconds()))
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
        create = f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"
        try:
            await self.kube.request("POST", create, body=body)
        except NotFound:  # the shared namespace does not exist yet: create it, as medik8s operators do
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
            try:
                await self.kube.request("POST", "/api/v1/namespaces", body=namespace)
            except Conflict:
                pass  # created by someone else meanwhile
            await self.kube.request("POST", create, body=body)

    async def release(self) -> None:
        """Delete the Lease if we hold it; a Lease another holder took over stays theirs."""
        self._last = None
        try:
            lease = await self.kube.get(self.path)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != HOLDER_IDENTITY:
                return
            preconditions = {"uid": lease["metadata"]["uid"], "resourceVersion": lease["metadata"]["resourceVersion"]}
            await self.kube.request("DELETE", self.path, body={"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": preconditions})
        except (NotFound, Conflict):
            return  # gone, or changed hands meanwhile
        except ApiError as error:
            log.warning("could not release the remediation Lease %s: %s", self.path, error)
