"""Run the operator as a local process against a local cluster, exactly as OLM would wire it:
under a ServiceAccount bound to the CSV's permissions (never cluster-admin), with a serving
certificate for its webhooks and the CRD's conversion pointed at it."""

from __future__ import annotations

import base64
import json
import os
import ssl
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from node_maintenance.api import CRD_NAME, SERVICE_ACCOUNT
from node_maintenance.api.roles import METRICS_READER_ROLE
from node_maintenance.client.config import SERVICE_ACCOUNT_DIR
from node_maintenance_packaging.clusterserviceversion import NAMESPACE

from .cluster import Cluster
from .processes import Process, free_port
from .waiting import ClusterError, wait_for

ROOT = Path(__file__).resolve().parents[2]
CSV_FILE = ROOT / "bundle" / "manifests" / "node-maintenance-operator.clusterserviceversion.yaml"
# The user the operator's requests are made as (what the audit log records).
USER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"


def csv_install_spec(csv_file: Path = CSV_FILE) -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load(csv_file.read_text())["spec"]["install"]["spec"]
    return spec


# The flags a local process sets itself (its ports); the CSV's values are for a pod of its own.
_OWN_FLAGS = ("--health-port", "--webhook-port", "--metrics-port")
# Who reads a secured /metrics here: a ServiceAccount bound to the metrics-reader ClusterRole the bundle ships.
SCRAPER = "metrics-scraper"


def _container_args(csv_file: Path) -> list[str]:
    """The operator container's arguments in the CSV's Deployment."""
    container = csv_install_spec(csv_file)["deployments"][0]["spec"]["template"]["spec"]["containers"][0]
    return list(container.get("args") or [])


def csv_metrics_port(csv_file: Path = CSV_FILE) -> bool:
    """Whether the CSV serves /metrics on a port of its own (over HTTPS, to whom may read it)."""
    return any(arg.startswith("--metrics-port=") for arg in _container_args(csv_file))


def scraper_token(cluster: Cluster) -> str:
    """A token of the ServiceAccount that may read /metrics (it and its binding made once per cluster)."""
    role = next(CSV_FILE.parent.glob(f"{METRICS_READER_ROLE}_*.yaml"))
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": SCRAPER},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": METRICS_READER_ROLE},
               "subjects": [{"kind": "ServiceAccount", "name": SCRAPER, "namespace": NAMESPACE}]}
    cluster.kubectl("apply", "-f", str(role))
    cluster.kubectl("apply", "-f", "-", input=json.dumps(binding))
    config = yaml.safe_load(cluster.service_account_kubeconfig(NAMESPACE, SCRAPER).read_text())
    return str(config["users"][0]["user"]["token"])


def csv_args(csv_file: Path = CSV_FILE) -> list[str]:
    """The operator container's arguments in the CSV's Deployment (``--authorize-authors``, say), but the ports."""
    return [arg for arg in _container_args(csv_file) if arg.split("=", 1)[0] not in _OWN_FLAGS]


def csv_webhook(path: str, csv_file: Path = CSV_FILE) -> dict[str, Any]:
    """The CSV's webhook definition served at ``path``: what OLM registers for it."""
    definitions: list[dict[str, Any]] = yaml.safe_load(csv_file.read_text())["spec"]["webhookdefinitions"]
    return next(definition for definition in definitions if definition.get("webhookPath") == path)


def grant_csv_permissions(cluster: Cluster, namespace: str, csv_file: Path = CSV_FILE) -> Path:
    """Create the CSV's ServiceAccount(s) with exactly its clusterPermissions and permissions, as OLM does;
    return a kubeconfig for the operator's ServiceAccount."""
    spec = csv_install_spec(csv_file)
    objects: list[dict[str, Any]] = []
    for scope, kind, binding in (
        ("clusterPermissions", "ClusterRole", "ClusterRoleBinding"),
        ("permissions", "Role", "RoleBinding"),
    ):
        for index, entry in enumerate(spec.get(scope) or []):
            name = f"{entry['serviceAccountName']}-{kind.lower()}-{index}"
            meta = {"name": name} if kind == "ClusterRole" else {"name": name, "namespace": namespace}
            objects.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta, "rules": entry["rules"]})
            objects.append(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": binding,
                    "metadata": meta,
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
                    "subjects": [{"kind": "ServiceAccount", "name": entry["serviceAccountName"], "namespace": namespace}],
                }
            )
    kubeconfig = cluster.service_account_kubeconfig(namespace, SERVICE_ACCOUNT)
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    return kubeconfig


def point_conversion_at(cluster: Cluster, url: str, ca_pem: bytes) -> None:
    """Patch the CRD's conversion to our webhook by URL, the way OLM injects its Service and CA."""
    patch = {
        "spec": {
            "conversion": {
                "strategy": "Webhook",
                "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"url": url, "caBundle": base64.b64encode(ca_pem).decode()},
                },
            }
        }
    }
    cluster.kubectl("patch", "crd", CRD_NAME, "--type=merge", "-p", json.dumps(patch))
    # The apiserver rebuilds the resource's storage after such a change and answers 429 meanwhile.
    wait_for("NodeMaintenances to be served after the conversion change",
             lambda: cluster.kubectl("get", "nodemaintenances", check=False).returncode == 0, 30)


class OperatorProcess:
    """One ``python -m node_maintenance`` process with its own ports, certificate and logs."""

    def __init__(
        self,
        cluster: Cluster,
        workdir: Path,
        kubeconfig: Path,
        *,
        namespace: str = NAMESPACE,
        identity: str = "replica-0",
        cert_dir: Path | None = None,
        bind_address: str = "127.0.0.1",
        webhook_port: int | None = None,
        health_port: int | None = None,
        in_pod: bool = False,
    ) -> None:
        """Without ``cert_dir`` the process gets a fresh self-signed serving certificate (``ca_pem``). With
        ``in_pod`` it finds the API server as in a pod (see :meth:`_as_in_a_pod`) instead of by kubeconfig."""
        from devcluster.pki import generate_self_signed

        self.cluster = cluster
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.cert_dir = cert_dir or workdir / "certs"
        self.ca_pem: bytes | None = None
        if cert_dir is None:
            self.cert_dir.mkdir(parents=True, exist_ok=True)
            self.ca_pem = generate_self_signed(self.cert_dir, ["127.0.0.1", "localhost"])
        self.bind_address = bind_address
        self.webhook_port = webhook_port or free_port()
        self.health_port = health_port or free_port()
        self._health_port_here = cluster.reach(self.health_port)
        self.metrics_port = free_port() if csv_metrics_port() else 0  # 0: /metrics on the health port, in clear
        self._metrics_port_here = cluster.reach(self.metrics_port) if self.metrics_port else 0
        self._scraper_token = ""
        self.identity = identity  # kept across restarts, like a container restarting in the same pod
        self.in_pod = in_pod
        self.process: Process | None = None
        self.starts = 0

    @property
    def webhook_url(self) -> str:
        return f"https://127.0.0.1:{self.webhook_port}"

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self._health_port_here}"

    def _as_in_a_pod(self, argv: list[str]) -> tuple[list[str], dict[str, str]]:
        """``argv`` and its environment as the operator runs in a pod: no kubeconfig, the API server named by
        KUBERNETES_SERVICE_HOST/PORT, and the ServiceAccount's token and CA at the pod's path, mounted in a mount
        namespace of the process's own (nothing outside it changes). What it costs in memory is then what the
        image costs: with a kubeconfig, the official client's loader is imported too."""
        config = yaml.safe_load(self.kubeconfig.read_text())
        account = self.workdir / "serviceaccount"
        account.mkdir(exist_ok=True)
        (account / "token").write_text(config["users"][0]["user"]["token"])
        (account / "ca.crt").write_bytes(Path(config["clusters"][0]["cluster"]["certificate-authority"]).read_bytes())
        host, port = self.cluster.server.removeprefix("https://").rsplit(":", 1)
        base = next(p for p in SERVICE_ACCOUNT_DIR.parents if p.exists())  # a fresh tmpfs there holds the pod's path
        mount = (f'mount -t tmpfs -o size=1m tmpfs "{base}" && mkdir -p "{SERVICE_ACCOUNT_DIR}" '
                 f'&& cp "{account}/token" "{account}/ca.crt" "{SERVICE_ACCOUNT_DIR}/" && exec "$@"')
        env = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port, "KUBECONFIG": "", "HOME": str(self.workdir)}
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, "sh", *argv], env

    def start(self, *extra: str) -> None:
        self.starts += 1
        argv = [sys.executable, "-m", "node_maintenance", f"--namespace={self.namespace}", f"--bind-address={self.bind_address}",
                f"--webhook-port={self.webhook_port}", f"--webhook-cert-dir={self.cert_dir}", f"--health-port={self.health_port}",
                f"--leader-elect-identity={self.identity}", *csv_args(),
                *([f"--metrics-port={self.metrics_port}"] if self.metrics_port else []), *extra]
        env = {"POD_NAMESPACE": self.namespace, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
        if self.in_pod:
            argv, found = self._as_in_a_pod(argv)
        else:
            found = {"KUBECONFIG": str(self.kubeconfig)}
        self.process = self.cluster.spawn(f"operator-{self.identity}-{self.starts}", argv, env={**env, **found}, log_dir=self.workdir)
        self.wait_ready()

    def wait_ready(self, timeout: float = 60) -> None:
        wait_for("the operator to be ready", self.ready, timeout, process=self.process)

    def ready(self) -> bool:
        """Whether the running process answers its readiness probe."""
        return self._get("/readyz") is not None

    def _get(self, path: str) -> str | None:
        try:
            with urllib.request.urlopen(self.health_url + path, timeout=2) as response:
                return response.read().decode() if response.status == 200 else None
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None

    def rss_bytes(self) -> int:
        """Resident memory of the running process, from /proc."""
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise ClusterError("VmRSS missing from /proc status")

    def metrics(self, token: str | None = None) -> str:
        """The /metrics text ("" when not served): over HTTPS with ``token`` (by default a scraper's, allowed to read it)
        where the CSV secures it, else from the health port."""
        if not self.metrics_port:
            return self._get("/metrics") or ""
        status, text = self.scrape(token)
        return text if status == 200 else ""

    def scrape(self, token: str | None = None) -> tuple[int, str]:
        """The secured /metrics' status and text for a request with ``token`` (None: the scraper's; empty: none)."""
        if token is None:
            self._scraper_token = self._scraper_token or scraper_token(self.cluster)
            token = self._scraper_token
        if self.ca_pem is not None:  # the CA of the certificate made for it
            context = ssl.create_default_context(cadata=self.ca_pem.decode())
        else:  # a certificate given by the caller, whose CA it keeps: the endpoint's own checks are what is tried
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        request = urllib.request.Request(f"https://127.0.0.1:{self._metrics_port_here}/metrics",
                                         headers={"Authorization": f"Bearer {token}"} if token else {})
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()
        except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
            return 0, str(error)  # no answer: why, for the failure's message

    def kill(self) -> None:
        if self.process and self.process.alive():
            self.process.popen.kill()
            self.process.popen.wait()

    def stop(self) -> None:
        if self.process:
            self.process.stop()

    def logs(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.workdir.glob(f"operator-{self.identity}-*.log")))
