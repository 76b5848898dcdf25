"""Storage-version migration: rewrite every stored NodeMaintenance as v1beta1, then forget older versions.

Once ``status.storedVersions`` is ``[v1beta1]``, a later release may stop serving the old versions
(the apiserver refuses to drop a version that may still be in etcd).
"""

from __future__ import annotations

import logging
from typing import Any, cast

from node_maintenance.api import HUB
from node_maintenance.api.paths import NODE_MAINTENANCE_CRD, nm_path
from node_maintenance.client import pages
from node_maintenance.client.errors import Conflict, NotFound
from node_maintenance.client.protocol import BlockingKubeApi

log = logging.getLogger(__name__)


def _rewrite(kube: BlockingKubeApi, name: str) -> bool:
    """Write the object back unchanged through the storage version; retry on conflicts, skip if gone."""
    while True:
        current = kube.get(nm_path(name))
        if current is None:
            return False
        try:
            kube.request("PUT", nm_path(name), body=current)
            return True
        except NotFound:
            return False
        except Conflict:
            continue


# Served by every release, and it always names the node in spec.nodeName.
OLDEST = "v1alpha1"


def working_version(crd: dict[str, Any]) -> str:
    """The version the operator reads and writes NodeMaintenances in under this CRD.

    v1beta1 when served; else v1alpha1, so an operator whose newer CRD is not installed yet (an OLM
    upgrade in progress, or an older release's CRD) still does its job in the version every release serves.
    """
    served = {version["name"] for version in crd["spec"]["versions"] if version.get("served")}
    return HUB if HUB in served else OLDEST


def storage_version(crd: dict[str, Any]) -> str:
    return cast(str, next(version["name"] for version in crd["spec"]["versions"] if version.get("storage")))


def read_crd(kube: BlockingKubeApi) -> dict[str, Any] | None:
    return kube.get(NODE_MAINTENANCE_CRD)


def migrate_storage_version(kube: BlockingKubeApi) -> int:
    """Rewrite all NodeMaintenances in the storage version and set storedVersions; return how many were rewritten.

    Idempotent: with storedVersions already ``[v1beta1]`` it does nothing.
    """
    crd = kube.request("GET", NODE_MAINTENANCE_CRD)
    stored = crd.get("status", {}).get("storedVersions") or []
    if stored == [HUB]:
        return 0
    # Names only, read a page at a time; an object the API server lists without a name cannot be rewritten anyway.
    names = [name for item in pages.items(kube, nm_path()) if isinstance(name := (item.get("metadata") or {}).get("name"), str)]
    rewritten = sum(_rewrite(kube, name) for name in names)
    kube.patch(NODE_MAINTENANCE_CRD + "/status", {"status": {"storedVersions": [HUB]}})
    log.info("storage version migration done", extra={"rewritten": rewritten, "previouslyStored": stored})
    return rewritten
