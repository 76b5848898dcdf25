"""OLM on the local cluster: its `olm` and `catalog` operators as local processes, our catalog served by
`opm serve`, and the operator process that stands in for the container of the pod OLM deploys.

Everything runs next to a ``Cluster(pod_network=True)``: OLM wires webhooks to a Service backed by the
operator's (simulated) pod, and only there is a pod IP an address a local process can answer at.
"""

from __future__ import annotations

import base64
import json
import shutil
import time
from pathlib import Path

import yaml

from . import toolchain
from .cluster import Cluster, ClusterError, wait_for
from .operator import OperatorProcess
from .processes import Process, free_port

ROOT = Path(__file__).resolve().parents[2]
CATALOG_DIR = ROOT / "catalog"
DEPLOY_DIR = ROOT / "olm-deploy-manifests" / "kubernetes"
NAMESPACE = "olm"  # OLM's own namespace and its global catalog namespace, as upstream deploys it
OLM_CRDS = "crds"  # directory in the github.com/operator-framework/api module
WEBHOOK_PORT = 9443  # the CSV's webhookdefinitions[].containerPort
HEALTH_PORT = 8081  # the CSV's health containerPort


def embedded_catalog(source: Path, target: Path) -> Path:
    """Copy the file-based catalog without its bundle image references.

    OLM unpacks a bundle that names an image with a Job running that image, which no simulated kubelet
    can do; without an image it installs from the bundle's olm.bundle.object properties, which our
    catalog carries. Nothing else changes: packages, channels, edges and manifests are the committed ones.
    """
    shutil.copytree(source, target)
    for path in target.rglob("*.yaml"):
        documents = list(yaml.safe_load_all(path.read_text()))
        for doc in documents:
            if doc.get("schema") == "olm.bundle" and "image" in doc:
                image = doc.pop("image")
                doc["relatedImages"] = [r for r in doc.get("relatedImages", []) if r["image"] != image]
        path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return target


class OLM:
    """OLM's two operators, the catalog server and the CatalogSource that points at it."""

    def __init__(self, cluster: Cluster, workdir: Path) -> None:
        if cluster.network is None:
            raise ClusterError("OLM needs a Cluster(pod_network=True): its webhook Services must reach pod IPs")
        self.cluster = cluster
        self.workdir = workdir
        self.processes: list[Process] = []
        self.catalog_source = ""

    def start(self) -> "OLM":
        started = time.monotonic()
        binaries = toolchain.ensure(["olm", "catalog", "opm"])
        crds = toolchain.module_source("olm", "github.com/operator-framework/api") / OLM_CRDS
        self.cluster.kubectl("apply", "--server-side", *(f"--filename={p}" for p in sorted(crds.glob("*.yaml"))))
        self.cluster.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        self.cluster.kubectl("create", "namespace", NAMESPACE)
        env = {"KUBECONFIG": str(self.cluster.kubeconfig), "OPERATOR_NAMESPACE": NAMESPACE}
        # Upstream's deployment arguments, minus the ClusterOperator status writers (an OpenShift API).
        self._spawn("olm-operator", [str(binaries["olm"]), f"--namespace={NAMESPACE}", "--writeStatusName=",
                                     "--writePackageServerStatusName="], {**env, "OPERATOR_NAME": "olm-operator"})
        self._spawn("catalog-operator", [str(binaries["catalog"]), f"--namespace={NAMESPACE}", "--writeStatusName=",
                                         f"--kubeconfig={self.cluster.kubeconfig}"], env)
        self.cluster.kubectl("apply", "-f", "-", input=json.dumps(
            {"apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig", "metadata": {"name": "cluster"}}))
        self._serve_catalog(binaries["opm"])
        self.startup_seconds = time.monotonic() - started
        return self

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Process:
        process = self.cluster.spawn(name, argv, env=env, log_dir=self.workdir)
        self.processes.append(process)
        return process

    def _serve_catalog(self, opm: Path) -> None:
        configs = embedded_catalog(CATALOG_DIR, self.workdir / "catalog")
        port = free_port()
        self._spawn("opm-serve", [str(opm), "serve", str(configs), f"--port={port}", f"--pprof-addr=127.0.0.1:{free_port()}"])
        source = yaml.safe_load((DEPLOY_DIR / "nm-catalog-source.yaml").read_text())
        # The one parameter: where the catalog is served (an address instead of an image to run).
        del source["spec"]["image"]
        source["spec"]["address"] = f"127.0.0.1:{port}"
        self.cluster.kubectl("apply", "-f", "-", input=json.dumps(source))
        self.catalog_source = source["metadata"]["name"]
        wait_for("the CatalogSource to connect to opm serve", self._catalog_ready, 90, details=self.logs)

    def _catalog_ready(self) -> bool:
        out = self.cluster.kubectl("get", "catalogsource", self.catalog_source, "-n", NAMESPACE,
                                   "-o", "jsonpath={.status.connectionState.lastObservedState}", check=False)
        return out.stdout.strip() == "READY"

    def logs(self, lines: int = 60) -> str:
        """The tail of every OLM process's log, for a failing test's report."""
        return "\n".join(f"----- {p.name} -----\n{p.log_tail(lines)}" for p in self.processes)

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()


class OperatorPod:
    """The real operator process behind the pod of the Deployment OLM installed.

    KWOK only simulates the pod; this process is its container: it runs in the pod network namespace on
    0.0.0.0 (so it answers at the pod's IP, where the webhook Service's endpoints point), with the serving
    certificate OLM generated into the Service's Secret, under the ServiceAccount OLM bound to the CSV's
    permissions. ``sync()`` follows the Deployment: a new pod (OLM rolled it) means a restarted process.
    """

    def __init__(self, cluster: Cluster, workdir: Path, namespace: str, deployment: str = "node-maintenance-operator") -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.namespace = namespace
        self.deployment = deployment
        self.pod = ""
        self.process: OperatorProcess | None = None

    def _json(self, *args: str) -> dict | None:
        result = self.cluster.kubectl("get", *args, "-n", self.namespace, "-o", "json", check=False)
        return json.loads(result.stdout) if result.returncode == 0 else None

    def _running_pod(self) -> dict | None:
        """The Ready pod of the Deployment once its rollout is complete (so the pod runs the current template)."""
        deployment = self._json("deployment", self.deployment)
        if not deployment:
            return None
        status, want = deployment.get("status", {}), deployment["spec"].get("replicas", 1)
        rolled_out = (
            status.get("observedGeneration") == deployment["metadata"]["generation"]
            and status.get("updatedReplicas") == want
            and status.get("availableReplicas") == want
            and status.get("replicas") == want
        )
        if not rolled_out:
            return None
        selector = ",".join(f"{k}={v}" for k, v in deployment["spec"]["selector"]["matchLabels"].items())
        pods = [
            p for p in (self._json("pods", "-l", selector) or {}).get("items", [])
            if p["status"].get("podIP") and not p["metadata"].get("deletionTimestamp")
            and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
        ]
        return pods[0] if len(pods) == 1 else None

    def _write_certificate(self, target: Path) -> None:
        """OLM's serving certificate for the webhook Service (``<deployment>-service-cert``), if the release has webhooks."""
        secret = self._json("secret", f"{self.deployment}-service-cert")
        if secret:
            target.mkdir(parents=True, exist_ok=True)
            for key in ("tls.crt", "tls.key"):
                (target / key).write_bytes(base64.b64decode(secret["data"][key]))

    def sync(self, timeout: float = 120) -> str:
        """Wait for the Deployment's pod and run the process for it; return the pod name."""
        return wait_for(f"a Ready pod of deployment {self.namespace}/{self.deployment}", self.poll, timeout)

    def poll(self) -> str | None:
        """If the Deployment has a Ready pod, make sure the process runs for it (restarting it for a new
        pod, as a rollout would); return the pod name, or None while there is no such pod.

        Call it while waiting on OLM: the webhooks must answer as soon as the pod is Ready, as they
        would in a real cluster (OLM validates stored objects through the conversion webhook)."""
        pod = self._running_pod()
        if pod is None:
            return None
        name = pod["metadata"]["name"]
        if name == self.pod and self.process and self.process.process and self.process.process.alive():
            return name
        self.stop()
        workdir = self.workdir / name
        cert_dir = workdir / "certs"
        self._write_certificate(cert_dir)
        kubeconfig = self.cluster.service_account_kubeconfig(self.namespace, pod["spec"]["serviceAccountName"])
        self.process = OperatorProcess(
            self.cluster, workdir, kubeconfig, namespace=self.namespace, identity=name,
            cert_dir=cert_dir, bind_address="0.0.0.0", webhook_port=WEBHOOK_PORT, health_port=HEALTH_PORT,
        )
        self.process.start()
        self.pod = name
        return name

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None
        self.pod = ""

    def logs(self) -> str:
        return self.process.logs()[-6000:] if self.process else ""
