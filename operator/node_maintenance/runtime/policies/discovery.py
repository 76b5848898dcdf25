"""Whether NodeMaintenancePolicies are served, from one look at their CRD.

Releases before 0.4.0 install no policy CRD, and their RBAC grants nothing on policies or Jobs: only the API
server's answer that this CRD does not exist means that no policy applies. Anything short of that answer is
trouble, and the policies count as unknown until a later look reads the CRD.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from node_maintenance.api import POLICY
from node_maintenance.api.paths import CRDS_KIND, POLICY_CRD, POLICY_VERSION
from node_maintenance.client.errors import KubeError, NotFound
from node_maintenance.client.protocol import KubeApi

# The CRD is looked at this often: an upgrade installs it while the operator runs.
CRD_CHECK_SECONDS = 5.0


@dataclass(frozen=True)
class CrdLook:
    """What one look at the policy CRD found."""

    absent: bool | None  # True: the server said it does not exist; False: it exists; None: not known from this look
    serving: bool = False  # established, and serving the version the policies are read in
    trouble: str = ""  # why the look does not tell that policies are served or absent ("" when it does)


async def look(kube: KubeApi) -> CrdLook:
    """Read the policy CRD once."""
    try:
        crd = await kube.request("GET", POLICY_CRD)
    except NotFound as missing:
        if missing.names(CRDS_KIND, POLICY.crd_name):
            return CrdLook(absent=True)
        # a path not served (yet): an API server starting answers so before it serves CRDs
        return CrdLook(absent=None, trouble=f"the NodeMaintenancePolicy CRD could not be read: {missing}")
    except KubeError as error:  # unknown: whatever was known holds, and no node is taken meanwhile
        return CrdLook(absent=None, trouble=f"the NodeMaintenancePolicy CRD could not be read: {error}")
    if served_version(crd):
        return CrdLook(absent=False, serving=True)
    # being installed or changed: its version is not served yet
    return CrdLook(absent=False, trouble=f"the NodeMaintenancePolicy CRD is not established or does not serve {POLICY_VERSION} yet")


def served_version(crd: Mapping[str, Any]) -> bool:
    """Whether the CRD is established and serves the version the policies are read in."""
    established = any(c.get("type") == "Established" and c.get("status") == "True" for c in (crd.get("status") or {}).get("conditions") or [])
    return established and any(v["name"] == POLICY_VERSION and v.get("served") for v in crd["spec"]["versions"])
