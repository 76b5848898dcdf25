"""OLM on the local cluster, on the path an admin's cluster takes: OLM's `olm` and `catalog` operators
(local processes with upstream's arguments), OLM's package server (the PackageManifest API OperatorHub
reads) installed by the olm operator from upstream's packageserver CSV, our catalog image served by the
registry pod OLM starts on the real node, our bundle images unpacked by OLM's Jobs (with OLM's util image
and the opm image, built from their pinned modules and named by the catalog operator's own flags), and
our operator run by OLM's Deployment from its image.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

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
# How long OLM retries a failing InstallPlan before it fails it: upstream's default, stated so that the tests
# can bound their waits by it. A reinstall over kept NodeMaintenances needs that retry (see start()), and the
# operator's pod took 35 s to become ready at a load of 25, longer than the 30 s this once was.
INSTALL_PLAN_RETRY_SECONDS = 60
# OLM's label naming a CatalogSource on its serving registry pod (a registry poll's update pod has it empty).
SOURCE_LABEL = "olm.catalogSource"
OLM_MODULE = "github.com/operator-framework/operator-lifecycle-manager"
OLM_CHART = "deploy/chart"  # OLM's Helm chart, which its release manifests are rendered from
UPSTREAM_VALUES = "deploy/upstream/values.yaml"  # the values of OLM's upstream (not OpenShift) release
# The chart's templates that install the package server: the ServiceAccount its pods run as (with its
# ClusterRole and binding), the OperatorGroup of OLM's namespace, and the packageserver CSV, whose
# apiservicedefinitions make the olm operator create the Deployment, Service, certificate and APIService.
PACKAGE_SERVER_TEMPLATES = (
    "templates/0000_50_olm_02-olm-operator.serviceaccount.yaml",
    "templates/0000_50_olm_13-operatorgroup-default.yaml",
    "templates/0000_50_olm_15-packageserver.clusterserviceversion.yaml",
)


def catalog_source(registry: str) -> dict[str, Any]:
    """The CatalogSource exactly as rendered for the committed manifests, with one parameter: the registry."""
    inputs = load_inputs(ROOT / RELEASES_FILE, registry=registry)
    rendered = {f.path.name: f.content for f in deploy_output(inputs).files if f.path.parent.name == "kubernetes"}
    source: dict[str, Any] = yaml.safe_load(rendered[CATALOG_SOURCE])
    return source


def package_server_manifests(image: str, workdir: Path) -> list[dict[str, Any]]:
    """The package server's objects of OLM's release manifests, rendered as OLM's release script renders them
    (its chart at the pinned version, with upstream's values), with one value of ours: the image, built here
    from the same module. The chart's objects in its other namespace (`operators`, which OLM's own
    install makes and nothing here uses) are left out."""
    source = toolchain.module_source("olm", OLM_MODULE)
    version = toolchain.module_version("olm", OLM_MODULE).removeprefix("v")
    chart = _versioned_chart(source / OLM_CHART, version, workdir / "olm-chart")
    rendered = subprocess.run(
        [str(toolchain.binary("helm")), "template", f"--namespace={NAMESPACE}", f"--values={source / UPSTREAM_VALUES}",
         "--set", f"namespace={NAMESPACE},catalog_namespace={NAMESPACE},package.image.ref={image}",
         *(f"--show-only={template}" for template in PACKAGE_SERVER_TEMPLATES), str(chart)],
        capture_output=True, text=True)
    if rendered.returncode != 0:
        raise ClusterError(f"helm template of OLM's chart failed:\n{rendered.stderr}")
    objects = [obj for obj in yaml.safe_load_all(rendered.stdout) if obj]
    return [obj for obj in objects if obj["metadata"].get("namespace", NAMESPACE) == NAMESPACE]


def _versioned_chart(chart: Path, version: str, target: Path) -> Path:
    """A copy of OLM's chart carrying the release's version, as OLM's release script makes it: the CSV's
    version and its olm.version label come from there (the module's copy says 0.0.0-dev)."""
    for path in chart.rglob("*"):
        if path.is_file():
            copy = target / path.relative_to(chart)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(path.read_bytes())
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    (target / "Chart.yaml").write_text(yaml.safe_dump({**meta, "version": version}))
    return target


class OLM:
    """OLM's two operators, its package server and our CatalogSource, on a cluster with a real node and our images published."""

    def __init__(self, cluster: Cluster, workdir: Path, published: Published) -> None:
        if cluster.node is None:
            raise ClusterError("OLM runs its registry pods and unpack Jobs: it needs a Cluster(real_node=True)")
        self.cluster = cluster
        self.workdir = workdir
        self.published = published
        self.processes: list[Process] = []
        self.catalog_source = ""
        self.package = load_inputs(ROOT / RELEASES_FILE).releases.package
        self.package_server_csv = ""
        self.packages_api = ("", "")  # the group and version the package server serves, as its CSV declares them

    def start(self) -> OLM:
        """Start OLM and its package server, add our CatalogSource, and wait until OLM reaches the catalog. The
        package server starts meanwhile; what reads PackageManifests waits for it (``wait_package_listed``)."""
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
        self.catalog_operator = self._spawn("catalog-operator", [
            str(binaries["catalog"]), f"--namespace={NAMESPACE}", "--writeStatusName=", f"--kubeconfig={self.cluster.kubeconfig}",
            f"--opmImage={self.published.opm_image}", f"--util-image={self.published.util_image}",
            "--set-workload-user-id=true",
            # OLM resolves a Subscription again on this timer too (upstream: 15m). A resolution that ran
            # while the replaced CSV was still being removed fails, and only the timer retries it.
            f"--interval={RESYNC}",
            # A reinstall over kept NodeMaintenances reads them through the conversion webhook OLM has just
            # pointed at a pod that is still starting, and only OLM's retry of the InstallPlan gets it through,
            # as it does for users: the window is upstream's, not one shortened to make refusals quicker.
            f"--install-plan-retry-timeout={INSTALL_PLAN_RETRY_SECONDS}s",
        ], env)
        self.cluster.kubectl("apply", "-f", "-", input=json.dumps(
            {"apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig", "metadata": {"name": "cluster"}}))
        self._install_package_server()
        source = catalog_source(self.published.registry)
        self.cluster.kubectl("apply", "-f", "-", input=json.dumps(source))
        self.catalog_source = source["metadata"]["name"]
        # The real node pulls and unpacks the catalog's and the package server's images into a containerd that has
        # none yet; beside the end-to-end clusters' load, both pods stayed ContainerCreating for 120 s.
        wait_for("the CatalogSource READY (its registry pod runs our catalog image)", self.catalog_ready, 300, details=self.logs)
        self.startup_seconds = time.monotonic() - started
        return self

    def _install_package_server(self) -> None:
        """Apply upstream's package server objects; the olm operator installs the CSV and registers its API."""
        package_server = package_server_manifests(self.published.util_image, self.workdir)
        self.cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": package_server}))
        csv = next(obj for obj in package_server if obj["kind"] == "ClusterServiceVersion")
        self.package_server_csv = csv["metadata"]["name"]
        (served,) = csv["spec"]["apiservicedefinitions"]["owned"]  # the PackageManifest API
        self.packages_api = (served["group"], served["version"])

    def wait_package_listed(self, timeout: float = 180) -> None:
        """Wait until the PackageManifest API lists our package: the package server's CSV has succeeded, the API
        server routes the API to it, and it has read our catalog."""
        wait_for(f"OLM's package server listing the package {self.package}", self.package_listed, timeout,
                 details=self.package_server_report)

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Process:
        process = self.cluster.spawn(name, argv, env=env, log_dir=self.workdir)
        self.processes.append(process)
        return process

    def catalog_ready(self) -> bool:
        out = self.cluster.kubectl("get", "catalogsource", self.catalog_source, "-n", NAMESPACE,
                                   "-o", "jsonpath={.status.connectionState.lastObservedState}", check=False)
        return out.stdout.strip() == "READY"

    def package_listed(self) -> bool:
        """The PackageManifest API answers through the API server's aggregation layer with our package."""
        group, version = self.packages_api
        path = f"/apis/{group}/{version}/namespaces/{NAMESPACE}/packagemanifests/{self.package}"
        return self.cluster.kubectl("get", "--raw", path, check=False).returncode == 0

    def package_server_report(self) -> str:
        """Where the package server's install stands (its CSV, the APIService OLM made from it), then the logs."""
        csv = self.cluster.kubectl("get", "csv", self.package_server_csv, "-n", NAMESPACE, "-o",
                                   "jsonpath={.status.phase}: {.status.message}", check=False)
        group, version = self.packages_api
        api = self.cluster.kubectl("get", "apiservice", f"{version}.{group}", "-o", "jsonpath={.status.conditions}", check=False)
        return (f"CSV {self.package_server_csv}: {csv.stdout}{csv.stderr}\n"
                f"APIService {version}.{group}: {api.stdout}{api.stderr}\n{self.logs()}")

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

    def resolution_mark(self) -> int:
        """How far the catalog operator has logged now: ``resolved_without_subscriptions`` reads what follows."""
        return self.catalog_operator.log_path.stat().st_size

    def resolved_without_subscriptions(self, namespace: str, since: int) -> bool:
        """Whether the catalog operator, after the mark ``since``, resolved ``namespace`` and found no Subscription.

        OLM ends each resolution of a namespace by writing the status it worked out for every Subscription it listed
        onto whatever Subscription of that name it reads at that moment (``updateSubscriptionStatuses``: a GET by name,
        no uid). A Subscription created again while a resolution that listed its deleted predecessor still runs (one
        takes 1 to 2 s here) gets the predecessor's status: an installPlanRef to the InstallPlan deleted with it and
        the state UpgradePending, after which OLM never resolves it again ("skipping update: installplan already
        created") and no InstallPlan comes. A namespace's resolutions run one at a time (one key of one work queue),
        so once one has found no Subscription, none that listed the deleted one is left. OLM tells that moment
        nowhere but in its log."""
        with open(self.catalog_operator.log_path, "rb") as log:
            log.seek(since)
            logged = log.read().decode(errors="replace")
        return f'msg="No subscriptions were found in namespace {namespace}"' in logged

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()
