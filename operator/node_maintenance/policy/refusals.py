"""Why the admission webhook refuses to store a NodeMaintenancePolicy, as a pure function of its body: what the
decisions would refuse later anyway (a hook that would run as the operator, a window that cannot be read) is refused
at once, to whoever writes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from node_maintenance.policy import hooks, windows


def admission_refusal(body: Mapping[str, Any]) -> str | None:
    """Why the admission webhook refuses to store the policy ``body`` (created or updated), or None to store it: a hook
    that would run as the operator, a window that cannot be read."""
    spec = body.get("spec") or {}
    reasons = hooks.borrowed_identities(hooks.templates(spec)) + windows.parse(spec.get("windows") or ())[1]
    return f"NodeMaintenancePolicy {(body.get('metadata') or {}).get('name', '')}: {'; '.join(reasons)}" if reasons else None
