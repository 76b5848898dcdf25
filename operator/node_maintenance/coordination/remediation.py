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

A Lease is created for a first term of a minute only, and the first renewal, half a minute later,
extends it to the hour. A create carries no resourceVersion: one whose answer was lost may still be
carried out by the server after the maintenance ended and its release found no Lease to delete; the
Lease it leaves then keeps remediation from the node for that minute, not for an hour.

Pure functions decide; ``runtime.leases`` does the few requests and remembers when to renew.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from node_maintenance.api import GROUP
from node_maintenance.api.conditions import Condition
from node_maintenance.coordination import lease_rules

DEFAULT_LEASE_NAMESPACE = "medik8s-leases"
LEASE_NAMESPACE_ENV = "REMEDIATION_LEASE_NAMESPACE"
HOLDER_IDENTITY = "node-maintenance-operator"
REMEDIATION_LEASE_SECONDS = 3600
FIRST_LEASE_SECONDS = 60
# A Lease another holder owns is looked at again this often (or when it expires, if sooner); one we may
# not write (no permission), less often: that changes only with the operator's RBAC.
LEASE_HELD_RECHECK_SECONDS = 5.0
FORBIDDEN_RECHECK_SECONDS = 60.0
EXCLUDE_LABEL = "remediation.medik8s.io/exclude-from-remediation"
# The label's value before we set it, as JSON (null: it was absent), so the node is given back as it was.
LABEL_BEFORE = f"{GROUP}/exclude-from-remediation-before"
CONDITION = "RemediationLease"


def lease_name(node_name: str) -> str:
    return f"node-{node_name}".lower()


def other_holder(lease: dict[str, Any] | None, now: datetime.datetime) -> str | None:
    """The holder that owns the node's Lease now, if that is not us; None when we may take or keep it."""
    return lease_rules.other_holder(lease, HOLDER_IDENTITY, now)


def claimed(lease: dict[str, Any] | None, node: dict[str, Any], namespace: str, now: datetime.datetime) -> dict[str, Any]:
    """The node's Lease as we write it to hold it from ``now``, owned by the Node (it goes with it): created for its
    first term, taken over or renewed for the hour."""
    duration = FIRST_LEASE_SECONDS if lease is None else REMEDIATION_LEASE_SECONDS
    body = lease_rules.claimed(lease, HOLDER_IDENTITY, duration, now, {"name": lease_name(node["metadata"]["name"]), "namespace": namespace})
    body["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node["metadata"]["name"], "uid": node["metadata"]["uid"]}]
    return body


def renew_after(claim: LeaseClaim) -> float:
    """Seconds after writing ``claim`` that the Lease is renewed: once half its term has passed."""
    return float(claim.body["spec"]["leaseDurationSeconds"]) / 2


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
    raced: bool = False  # another writer changed the Lease while we wrote it: who holds it now is not known

    @property
    def held(self) -> bool:
        return self.other is None and not self.problem


def condition(state: LeaseState) -> Condition:
    """The RemediationLease condition: what holding the Lease met."""
    name = f"{state.namespace}/{lease_name(state.node_name)}"
    if state.other:
        return Condition(CONDITION, "False", "HeldByAnother", held_message(state.namespace, state.node_name, state.other))
    if state.problem:
        return Condition(CONDITION, "False", "LeaseUnavailable", (f"Lease {name} could not be held ({state.problem}); the node carries "
                                                                  f"{EXCLUDE_LABEL}=true, which remediation also honours"))
    return Condition(CONDITION, "True", "Held", f"Lease {name} is held as {HOLDER_IDENTITY} while the node is in maintenance")


@dataclass(frozen=True)
class LeaseView:
    """What the engine knows of the node's Lease when it plans.

    ``known`` is what the last claim met (None: never claimed by this engine). When a claim or renewal
    is ``due``, ``read`` is the Lease the server holds now (None: there is none).
    """

    namespace: str
    node_name: str
    known: LeaseState | None = None
    due: bool = False
    read: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class LeaseClaim:
    """The Lease to write: created when ``create``, else replaced (its resourceVersion makes that a compare-and-swap)."""

    namespace: str
    node_name: str
    body: dict[str, Any]
    create: bool
    # The node is taken in the same step, right after this claim, only if no other writer changed the Lease meanwhile.
    before_take: bool = False


@dataclass(frozen=True)
class Standing:
    """What the node's Lease means for one drain step (:func:`standing`)."""

    seen: LeaseState | None = None  # another holder owns the Lease just read: who, and when to look again
    state: LeaseState | None = None  # what is known of the Lease: its condition in the status
    claim: LeaseClaim | None = None  # the write that takes or renews it, when one is due and no other holder owns it


def standing(view: LeaseView, node: dict[str, Any], now: datetime.datetime) -> Standing:
    """What the node's Lease means at ``now``. When a claim or renewal is due, the Lease just read either belongs to
    another holder, which replaces what was known (a Lease another holder let go no longer holds the node back), or is
    claimed, and a claim of ours that stands stays known as held; otherwise what the last claim met stands."""
    if not view.due:
        return Standing(state=view.known)
    read = dict(view.read) if view.read is not None else None
    body = claimed(read, node, view.namespace, now)
    holder, due = lease_rules.holding(read, HOLDER_IDENTITY, now)
    if holder:
        wait = LEASE_HELD_RECHECK_SECONDS if due is None else min(LEASE_HELD_RECHECK_SECONDS, max(0.5, (due - now).total_seconds()))
        seen = LeaseState(view.namespace, view.node_name, other=holder, recheck_in=wait)
        return Standing(seen=seen, state=seen)
    known = view.known if view.known is not None and view.known.held else None
    return Standing(state=known, claim=LeaseClaim(view.namespace, view.node_name, body, create=read is None))
