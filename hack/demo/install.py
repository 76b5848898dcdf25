"""Installing the operator as an admin does: the four objects of ``olm-deploy-manifests/kubernetes/``,
then OLM resolves the Subscription from our catalog image and runs the operator from its image."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import yaml

from devcluster.cluster import Cluster
from devcluster.olm import DEPLOY_DIR
from devcluster.publish import ROOT
from devcluster.waiting import ClusterError, polls
from node_maintenance_packaging.render import RELEASES_FILE, deploy_output, load_inputs

ORDER = ("nm-ns.yaml", "nm-op-group.yaml", "nm-catalog-source.yaml", "nm-sub.yaml")  # the Namespace first


def manifests(registry: str) -> list[dict[str, Any]]:
    """The four deploy manifests rendered for ``registry``; each equals the committed file but for image names."""
    inputs = load_inputs(ROOT / RELEASES_FILE, registry=registry)
    rendered = {f.path.name: f for f in deploy_output(inputs).files if f.path.parent.name == DEPLOY_DIR.name}
    committed_registry = load_inputs(ROOT / RELEASES_FILE).releases.registry
    for name in ORDER:
        if rendered[name].content.decode().replace(registry, committed_registry) != (DEPLOY_DIR / name).read_text():
            raise ClusterError(f"{rendered[name].path} is stale: run `make render` (nmo-pack all)")
    return [yaml.safe_load(rendered[name].content) for name in ORDER]


def apply(cluster: Cluster, objects: list[dict[str, Any]]) -> str:
    """``kubectl apply`` them, as one list; kubectl's own report."""
    return cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})).stdout


def _get(cluster: Cluster, *args: str) -> dict[str, Any] | None:
    result = cluster.kubectl("get", *args, "-o", "json", check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def wait_installed(cluster: Cluster, subscription: dict[str, Any], tell: Callable[[str, float], None],
                   timeout: float = 300) -> dict[str, Any]:
    """Wait until OLM has installed what ``subscription`` asks for: its CSV Succeeded and the operator's
    Deployment rolled out (its pod Ready). ``tell`` hears each step OLM takes; fails with OLM's own words."""
    namespace, name = subscription["metadata"]["namespace"], subscription["metadata"]["name"]
    started = time.monotonic()
    told = seen = ""
    for _ in polls(timeout):
        status = (_get(cluster, "subscription", name, "-n", namespace) or {}).get("status") or {}
        csv_name = status.get("installedCSV") or status.get("currentCSV")
        csv = _get(cluster, "csv", csv_name, "-n", namespace) if csv_name else None
        csv_status = (csv or {}).get("status") or {}
        seen = f"Subscription {status.get('state', 'not yet resolved')}" + (
            f", CSV {csv_name} {csv_status.get('phase', 'not yet created')}" if csv_name else "")
        if seen != told:
            tell(seen + (f" ({csv_status['reason']})" if csv_status.get("reason") else ""), time.monotonic() - started)
            told = seen
        if csv_status.get("phase") == "Failed":
            raise ClusterError(f"OLM could not install {csv_name}: {csv_status.get('message')}")
        if csv is not None and csv_status.get("phase") == "Succeeded":
            left = max(1, int(timeout - (time.monotonic() - started)))
            for deployment in csv["spec"]["install"]["spec"]["deployments"]:
                cluster.kubectl("rollout", "status", f"deployment/{deployment['name']}", "-n", namespace, f"--timeout={left}s")
            tell(f"Deployment {', '.join(d['name'] for d in csv['spec']['install']['spec']['deployments'])} rolled out",
                 time.monotonic() - started)
            return csv
    raise ClusterError(f"OLM did not install the operator within {timeout:.0f}s; last seen: {seen}")
