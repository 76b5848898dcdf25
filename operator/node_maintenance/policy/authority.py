"""What the author of a NodeMaintenance or a NodeMaintenancePolicy must be allowed to do themselves, as a pure function
of the object: the operator's rights are wider than most users', and what it does for an object is what the object asks.

Through the operator a person can do what they could do themselves, and no more. So a NodeMaintenance asks of its
author what `kubectl drain` of that node asks (patch the node, create evictions), and an escalation ladder, its own or
inherited from a policy's drain defaults, asks for the right to delete pods past their budgets: ``delete`` on pods, or
the dedicated verb ``escalate`` on nodemaintenances, which an admin grants on its own (as Kubernetes does with
``escalate`` and ``bind`` on roles). A policy's hook asks for the right to create Jobs in the namespace it names, where
the operator creates its Job. The admission webhook asks the API server each question with a
SubjectAccessReview of the request's user (:mod:`node_maintenance.webhooks.authorization`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from node_maintenance.api import GROUP, PLURAL
from node_maintenance.api.roles import ESCALATE_VERB, ESCALATOR_ROLE, REQUESTER_ROLE
from node_maintenance.policy import hooks


@dataclass(frozen=True)
class Access:
    """One question for the API server: may the user ``verb`` the resource (a SubjectAccessReview's resourceAttributes;
    an empty namespace asks for every namespace, an empty name for every object)."""

    verb: str
    resource: str
    group: str = ""
    subresource: str = ""
    name: str = ""
    namespace: str = ""
    namespaced: bool = True  # false for nodes and NodeMaintenances

    def attributes(self) -> dict[str, str]:
        """As a SubjectAccessReview's ``spec.resourceAttributes``."""
        asked = {"verb": self.verb, "group": self.group, "resource": self.resource, "subresource": self.subresource,
                 "name": self.name, "namespace": self.namespace}
        return {key: value for key, value in asked.items() if value}

    def __str__(self) -> str:
        resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        qualified = f"{resource}.{self.group}" if self.group else resource
        where = f" in namespace {self.namespace}" if self.namespace else " in every namespace" if self.namespaced else ""
        return f"{self.verb} {qualified}{'/' + self.name if self.name else ''}{where}"


@dataclass(frozen=True)
class Need:
    """One right the object asks of its author, met by any one of ``any_of``; ``field`` and ``fix`` say, in a refusal,
    which part of the object asks for it and what to do."""

    field: str
    any_of: tuple[Access, ...]
    fix: str

    def refusal(self, user: str) -> str:
        allowed = " nor ".join(str(access) for access in self.any_of)
        return f"{self.field}: user {user!r} may not {allowed}; {self.fix}"


def _escalates(drain: Mapping[str, Any] | None) -> bool:
    return bool(isinstance(drain, Mapping) and drain.get("escalation"))


def _escalation(field: str, fix: str) -> Need:
    return Need(field=field, any_of=(Access(ESCALATE_VERB, PLURAL, group=GROUP, namespaced=False), Access("delete", "pods")), fix=fix)


def maintenance_needs(obj: Mapping[str, Any], node: str, policy_drains: Iterable[Mapping[str, Any]] = ()) -> tuple[Need, ...]:
    """What creating ``obj`` (a NodeMaintenance in the storage version, for ``node``) asks of its author; ``policy_drains``:
    the drain defaults of the policies that select the node, whose escalation a maintenance silent on it inherits."""
    drain = (obj.get("spec") or {}).get("drain")
    drain = drain if isinstance(drain, Mapping) else {}
    needs = [
        Need(field="spec.nodeName", any_of=(Access("patch", "nodes", name=node, namespaced=False),),
             fix=f"ask an admin to bind the {REQUESTER_ROLE} ClusterRole, which grants what `kubectl drain` needs"),
        Need(field="spec.nodeName", any_of=(Access("create", "pods", subresource="eviction"),),
             fix=f"ask an admin to bind the {REQUESTER_ROLE} ClusterRole, which grants what `kubectl drain` needs"),
    ]
    if _escalates(drain):
        needs.append(_escalation("spec.drain.escalation",
                                 f"remove spec.drain.escalation, or ask an admin to bind the {ESCALATOR_ROLE} ClusterRole"))
    elif "escalation" not in drain and any(_escalates(defaults) for defaults in policy_drains):
        needs.append(_escalation("spec.drain.escalation (inherited from the drain defaults of the policy that selects the node)",
                                 f"set spec.drain.escalation: [] to drain by eviction alone, or ask an admin to bind the "
                                 f"{ESCALATOR_ROLE} ClusterRole"))
    return tuple(needs)


def policy_needs(obj: Mapping[str, Any]) -> tuple[Need, ...]:
    """What storing the policy ``obj`` asks of its author: drain defaults that escalate make every maintenance it governs
    escalate, so they ask what an escalation asks; each hook runs a Job in the namespace it names, so it asks for
    creating Jobs there."""
    spec = obj.get("spec") or {}
    needs = [Need(field=f"spec.{hooks.FIELDS[hook]}.namespace", any_of=(Access("create", "jobs", group="batch", namespace=namespace),),
                  fix=f"name a namespace where you may create Jobs, or ask an admin to let you create Jobs in namespace {namespace}")
             for hook, namespace in hooks.namespaces(spec).items() if namespace]
    if _escalates(spec.get("drain")):
        needs.append(_escalation("spec.drain.escalation", f"remove spec.drain.escalation, or ask an admin to bind the {ESCALATOR_ROLE} ClusterRole"))
    return tuple(needs)


def changed(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    """Whether an update changes what the object steers (its spec): an update of metadata alone (a finalizer, the
    operator's own annotations) asks nothing of its author."""
    return old is None or obj.get("spec") != old.get("spec")
