"""Why the admission webhook refuses to store a NodeMaintenancePolicy, as a pure function of its body: what the
decisions would refuse later anyway (a hook that would run as the operator or in its namespace, a window that cannot be
read) is refused at once, to whoever writes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from node_maintenance.policy import authority, hooks, windows


def admission_refusal(body: Mapping[str, Any], operator_namespace: str, old: Mapping[str, Any] | None = None) -> str | None:
    """Why the admission webhook refuses to store the policy ``body`` (created, or updated from ``old``), or None to store
    it: a hook that would run as the operator, a window that cannot be read, and, on a new policy or a changed spec, a hook
    naming no namespace or ``operator_namespace`` (a policy stored before the field existed may still change its metadata)."""
    spec = body.get("spec") or {}
    misplaced = hooks.misplacements(hooks.namespaces(spec), operator_namespace) if authority.changed(body, old) else ()
    reasons = misplaced + hooks.borrowed_identities(hooks.templates(spec)) + windows.parse(spec.get("windows") or ())[1]
    return f"NodeMaintenancePolicy {(body.get('metadata') or {}).get('name', '')}: {'; '.join(reasons)}" if reasons else None
