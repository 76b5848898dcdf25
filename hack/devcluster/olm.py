"""OLM on the local cluster, on the path an admin's cluster takes: OLM's `olm` and `catalog` operators
(local processes with upstream's arguments), our catalog image served by the registry pod OLM starts on
the real node, our bundle images unpacked by OLM's Jobs (with OLM's util image and the opm image, built
from their pinned modules and named by the catalog operator's own flags), and our operator run by OLM's
Deployment from its image.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml

from node_maintenance_packaging.render import RELEASES_FILE, deploy_output, load_inputs

from . import toolchain
from .cluster import Cluster
from .processes import Process
from .publish import ROOT, Published
from .waiting import ClusterError, wait_for

DEPLOY_DIR = ROOT / "olm-deploy-manifests" / "kubernetes"
NAMESPACE = "olm"  # OLM's own namespace and its global catalog namespace, as upstream deploys it
OLM_CRDS = "crds"  # directory in the github.com/operator-framework/api module
CATALOG_SOURCE = "nm-catalog-source.yaml"
RESYNC = "30s"
# OLM's label naming a CatalogSource on its serving registry pod (a registry poll's update pod has it empty).
SOURCE_LABEL = "olm.catalogSource"


def catalog_source(registry: str) -> dict:
    """The CatalogSource exactly as rendered for the committed manifests, with one parameter: the registry."""
    inputs = load_inputs(ROOT / RELEASES_FILE, registry=registry)
    rendered = {f.path.name: f.content for f in deploy_output(inputs).files if f.path.parent.name == "kubernetes"}
    return yaml.safe_load(rendered[CATALOG_SOURCE])


class OLM:
    """OLM's two operators and our CatalogSource, on a cluster with a real node and our images published."""

    def __init__(self, cluster: Cluster, workdir: Path, published: Published) -> None:
        if cluster.node is None:
            raise ClusterError("OLM runs its registry pods and unpack Jobs: it needs a Cluster(real_node=True)")
        self.cluster = cluster
        self.workdir = workdir
        self.published = published
        self.processes: list[Process] = []
        self.catalog_source = ""

    def start(self) -> OLM:
        """Start OLM and add our CatalogSource, and wait until OLM reaches the catalog."""
        started = time.monotonic()
        binaries = toolchain.ensure(["olm", "catalog"])
        crds = toolchain.module_source("olm", "github.com/operator-framework/api") / OLM_CRDS
        self.cluster.kubectl("apply", "--server-side", *(f"--filename={p}" for p in sorted(crds.glob("*.yaml"))))
        self.cluster.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        self.cluster.kubectl("create", "namespace", NAMESPACE)
        env = {"KUBECONFIG": str(self.cluster.kubeconfig), "OPERATOR_NAMESPACE": NAMESPACE}
        # Upstream's deployment arguments, minus the ClusterOperator status writers (an OpenShift API).
        self._spawn("olm-operator", [str(binaries["olm"]), f"--namespace={NAMESPACE}", "--writeStatusName=",
                                     "--writePackageServerStatusName="], {**env, "OPERATOR_NAME": "olm-operator"})
        self._spawn("catalog-operator", [
            str(binaries["catalog"]), f"--namespace={NAMESPACE}", "--writeStatusName=", f"--kubeconfig={self.cluster.kubeconfig}",
            f"--opmImage={self.published.opm_image}", f"--util-image={self.published.util_image}",
            "--set-workload-user-id=true",
            # OLM resolves a Subscription again on this timer too (upstream: 15m). A resolution that ran
            # while the replaced CSV was still being removed fails, and only the timer retries it.
            f"--interval={RESYNC}",
            # OLM retries an InstallPlan that fails for a minute (--install-plan-retry-timeout), as upstream
            # deploys it: a reinstall over kept NodeMaintenances reads them through the conversion webhook
            # OLM has just pointed at a pod that is still starting, and only that retry gets it through.
        ], env)
        self.cluster.kubectl("apply", "-f", "-", input=json.dumps(
            {"apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig", "metadata": {"name": "cluster"}}))
        source = catalog_source(self.published.registry)
        self.cluster.kubectl("apply", "-f", "-", input=json.dumps(source))
        self.catalog_source = source["metadata"]["name"]
        wait_for("the CatalogSource READY (its registry pod runs our catalog image)", self.catalog_ready, 120, details=self.logs)
        self.startup_seconds = time.monotonic() - started
        return self

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Process:
        process = self.cluster.spawn(name, argv, env=env, log_dir=self.workdir)
        self.processes.append(process)
        return process

    def catalog_ready(self) -> bool:
        out = self.cluster.kubectl("get", "catalogsource", self.catalog_source, "-n", NAMESPACE,
                                   "-o", "jsonpath={.status.connectionState.lastObservedState}", check=False)
        return out.stdout.strip() == "READY"

    def serving(self, digest: str) -> bool:
        """The CatalogSource is READY and its registry pod (not a poll's update pod) runs the image ``digest``."""
        out = self.cluster.kubectl("get", "pods", "-n", NAMESPACE, "-l", f"{SOURCE_LABEL}={self.catalog_source}",
                                   "-o", "json", check=False)
        pods = [p for p in json.loads(out.stdout or '{"items": []}')["items"] if not p["metadata"].get("deletionTimestamp")]
        statuses = [s for p in pods for s in p.get("status", {}).get("containerStatuses", [])]
        return (bool(statuses) and all(s.get("ready") and s.get("imageID", "").endswith(f"@{digest}") for s in statuses)
                and self.catalog_ready())

    def logs(self, lines: int = 60) -> str:
        """The tail of OLM's processes' logs and of the pods it ran (registry pods, unpack Jobs), for a failing test."""
        parts = [f"----- {p.name} -----\n{p.log_tail(lines)}" for p in self.processes]
        pods = self.cluster.kubectl("get", "pods", "-n", NAMESPACE, "-o", "name", check=False).stdout.split()
        for pod in pods:
            logs = self.cluster.kubectl("logs", "-n", NAMESPACE, pod, "--all-containers", f"--tail={lines}", check=False)
            parts.append(f"----- {pod} -----\n{logs.stdout}{logs.stderr}")
        return "\n".join(parts)

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()
