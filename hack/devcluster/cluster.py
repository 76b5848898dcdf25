"""Start and stop a real control plane on 127.0.0.1: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and KWOK (simulated nodes and kubelets), all from binaries built by ``toolchain``."""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

import yaml

from . import pki, toolchain
from .podnetwork import NODE_IP, PodNetwork
from .processes import Process, free_port
from .reads import Reads
from .realnode import RealNode, node_name
from .registry import Registry
from .waiting import ClusterError, wait_for

if TYPE_CHECKING:  # the official client costs 40 MiB of imports: only the tests that use it load it
    from kubernetes.client import ApiClient

# The one cluster, context and user entry of the kubeconfigs this harness writes.
KUBECONFIG_CLUSTER = "local"
# The Go runtime of the control plane and of kubectl collects garbage once its heap has grown fivefold, not twofold: a
# throwaway cluster has memory to spare, and on two cores every test waits for the CPU the collections took (an
# end-to-end module spent 9% less CPU in all, a kubectl call 18% less).
GO_RUNTIME = {"GOGC": "400"}
SERVICE_CIDR = "10.96.0.0/24"
# kubectl's own check of what it writes fetches and parses the API's OpenAPI document on every call (70 ms of CPU of its
# 120); asked to let the API server check the fields and warn (--validate=warn), it costs 50 ms, and the warning it
# prints for an unknown field fails the call here as its own check would.
UNKNOWN_FIELD = "unknown field"
# The controller-manager's controllers for what no test and no part of the product uses (volumes, quotas, autoscaling,
# CronJobs, ReplicationControllers, dynamic resources, storage migration, node CIDRs): each polls or watches the API
# server for nothing, and a throwaway cluster on two cores pays for it in every test.
UNUSED_CONTROLLERS = (
    "cronjob-controller", "device-taint-eviction-controller", "ephemeral-volume-controller", "horizontal-pod-autoscaler-controller",
    "kube-apiserver-serving-clustertrustbundle-publisher-controller", "legacy-serviceaccount-token-cleaner-controller",
    "node-ipam-controller", "persistentvolume-attach-detach-controller", "persistentvolume-binder-controller",
    "persistentvolume-expander-controller", "persistentvolume-protection-controller", "persistentvolumeclaim-protection-controller",
    "podcertificaterequest-cleaner-controller", "podgroup-protection-controller", "replicationcontroller-controller",
    "resourceclaim-controller", "resourcepoolstatusrequest-controller", "resourcequota-controller", "service-cidr-controller",
    "storage-version-migrator-controller", "storageversion-garbage-collector-controller", "ttl-controller",
    "validatingadmissionpolicy-status-controller", "volumeattributesclass-protection-controller",
)
SERVICE_IP = "10.96.0.1"
# Addresses KWOK hands simulated pods: nothing answers there.
KWOK_POD_CIDR = "10.244.0.0/16"
KWOK_SELECTOR = ("kwok.x-k8s.io/node", "fake")
# With a real node, simulated nodes carry this taint: only workloads that tolerate it (drain targets
# in tests) land there, and everything else (OLM's pods, the operator) runs for real.
KWOK_TAINT = {"key": KWOK_SELECTOR[0], "value": KWOK_SELECTOR[1], "effect": "NoSchedule"}
# KWOK's own stage definitions: nodes become Ready and keep a lease; pods become Running, Jobs' pods
# complete, and a deleted pod goes away once its grace period ends (and its finalizers are gone), as with a kubelet.
KWOK_STAGES = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/general/pod-delete.yaml",
)
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kubectl")


class Cluster:
    """A running local control plane. Use as a context manager, or call start()/stop().

    With ``real_node`` (root only) every component runs in network and mount namespaces of the
    cluster's own (``podnetwork``), which also hold a local image registry and ``real_nodes`` real nodes
    (``realnode``, one by default) whose kubelets run pods from it; KWOK nodes then carry ``KWOK_TAINT``.
    """

    # Further flags of a control-plane component, by its name: a subclass tunes one as a given cluster would.
    component_flags: ClassVar[dict[str, tuple[str, ...]]] = {}

    def __init__(self, workdir: Path | None = None, *, real_node: bool = False, real_nodes: int = 1,
                 audit_users: tuple[str, ...] = ()) -> None:
        """The audit log records requests about pods, and every request of ``audit_users``."""
        self._own_workdir = workdir is None
        self.real_node = real_node
        self.real_node_count = real_nodes if real_node else 0
        self.audit_users = audit_users
        self.network: PodNetwork | None = None
        self.registry: Registry | None = None
        self.nodes: list[RealNode] = []
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="nmo-cluster-"))
        self.processes: list[Process] = []
        self.bin: dict[str, Path] = {}
        self.admin_token = secrets.token_hex(16)
        self.etcd_url = ""
        self.server = ""
        self._reader: Reads | None = None

    # ----------------------------------------------------------------- lifecycle
    def __enter__(self) -> Self:
        self._restore_sigterm = _stop_on_sigterm()
        try:
            self.start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            self._restore_sigterm()

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def ca_file(self) -> Path:
        return self.workdir / "pki" / "ca.crt"

    @property
    def logs_dir(self) -> Path:
        return self.workdir / "logs"

    def start(self) -> None:
        started = time.monotonic()
        self.bin = toolchain.ensure(list(COMPONENTS))
        pki_dir = self.workdir / "pki"
        for directory in (pki_dir, self.logs_dir, self.workdir / "etcd"):
            directory.mkdir(parents=True, exist_ok=True)
        pki.write_cluster_pki(pki_dir, service_ip=SERVICE_IP)
        if self.real_node:
            self.network = PodNetwork(self.logs_dir, service_cidr=SERVICE_CIDR, kwok_pod_cidr=KWOK_POD_CIDR)
        self._start_etcd()
        self._start_apiserver(pki_dir)
        self._start_controllers(pki_dir)
        self._start_kwok()
        wait_for("the default ServiceAccount token signer (kube-root-ca.crt)", self._root_ca_published, 60)
        if self.real_node:
            self._start_real_node()
        self.startup_seconds = time.monotonic() - started

    def _start_real_node(self) -> None:
        assert self.network is not None
        self.registry = Registry(setup=self.network.enter)
        self._reach_at_same_port(self.registry.port)  # one image reference serves the host and the node
        self.registry.__enter__()
        for index in range(self.real_node_count):
            self.nodes.append(RealNode(self, self.registry.host, index))
            self.nodes[-1].start()

    @property
    def node(self) -> RealNode | None:
        """The first real node, where the cluster's DNS and kube-proxy run."""
        return self.nodes[0] if self.nodes else None

    def stop(self) -> None:
        """Stop every component (newest first) and remove the work directory."""
        for node in reversed(self.nodes):
            node.stop()
        self.nodes.clear()
        if self.registry is not None:
            self.registry.__exit__()
            self.registry = None
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()
        if self.network is not None:
            self.network.stop()
            self.network = None
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def restart(self, name: str, *flags: str) -> Process:
        """Stop one component (SIGTERM) and start it again as first started plus ``flags``, on the same data and
        ports; fault tests use it to take the API server or etcd away from the clients in the middle of their work."""
        index = next(i for i, p in enumerate(self.processes) if p.name == name)
        old = self.processes[index]
        old.stop()
        if not hasattr(self, "_first_argv"):
            self._first_argv: dict[str, list[str]] = {}
        first = self._first_argv.setdefault(name, old.argv)
        self.processes[index] = process = self.spawn(name, [*first, *flags])
        ready = {"etcd": lambda: self._http_ok(f"{self.etcd_url}/health"), "kube-apiserver": lambda: self._api_ok("/readyz")}
        if name in ready:
            wait_for(f"{name} ready after its restart", ready[name], 60, process)
        return process

    def pids(self) -> list[int]:
        return ([p.pid for p in self.processes] + (self.network.pids() if self.network else [])
                + [pid for node in self.nodes for pid in node.pids()] + ([self.registry.process.pid] if self.registry and self.registry.process else []))

    # ----------------------------------------------------------------- processes
    def spawn(self, name: str, argv: list[str], *, env: dict[str, str] | None = None, log_dir: Path | None = None) -> Process:
        """Start a process next to the control plane (in its network namespace, if it has one).

        The cluster does not own it: the caller stops it."""
        setup = self.network.enter if self.network else None
        return Process(name, argv, log_dir or self.logs_dir, {**GO_RUNTIME, **(env or {})}, setup=setup)

    def reach(self, port: int) -> int:
        """The port on the host's 127.0.0.1 at which 127.0.0.1:``port`` of a ``spawn``-ed process answers."""
        if self.network is None:
            return port
        host_port = free_port()
        self.network.forward(port, host_port)
        return host_port

    def _reach_at_same_port(self, port: int) -> None:
        """Forward ``port`` to the same number on the host: one URL serves clients inside and outside."""
        if self.network is not None:
            self.network.forward(port, port)

    def _spawn(self, name: str, argv: list[str]) -> Process:
        process = self.spawn(name, [*argv, *self.component_flags.get(name, ())])
        self.processes.append(process)
        return process

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        self._reach_at_same_port(client)
        etcd = self._spawn(
            "etcd",
            [
                str(self.bin["etcd"]),
                "--name=default",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=default=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync",  # a throwaway store: durability buys nothing, fsync costs seconds
                "--log-level=warn",
            ],
        )
        wait_for("etcd /health", lambda: self._http_ok(f"{self.etcd_url}/health"), 30, etcd)

    def _start_apiserver(self, pki_dir: Path) -> None:
        port = free_port()
        self.server = f"https://127.0.0.1:{port}"
        self._reach_at_same_port(port)
        tokens = self.workdir / "tokens.csv"
        tokens.write_text(
            "\n".join(
                [
                    f'{self.admin_token},admin,admin,"system:masters"',
                    f"{self._component_token('controller-manager')},system:kube-controller-manager,kcm",
                    f"{self._component_token('scheduler')},system:kube-scheduler,scheduler",
                    *(f'{self.node_token(name)},system:node:{name},{name},"system:nodes"'
                      for name in map(node_name, range(self.real_node_count))),
                    f"{self.kube_proxy_token},system:kube-proxy,kube-proxy",
                ]
            )
            + "\n"
        )
        tokens.chmod(0o600)
        apiserver = self._spawn(
            "kube-apiserver",
            [
                str(self.bin["kube-apiserver"]),
                f"--etcd-servers={self.etcd_url}",
                *self._apiserver_address_flags(),
                f"--secure-port={port}",
                f"--tls-cert-file={pki_dir / 'tls.crt'}",
                f"--tls-private-key-file={pki_dir / 'tls.key'}",
                f"--token-auth-file={tokens}",
                f"--authorization-mode={'Node,RBAC' if self.real_node else 'RBAC'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki_dir / 'sa.pub'}",
                f"--service-account-signing-key-file={pki_dir / 'sa.key'}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                "--profiling=false",
                # Webhook and APIService Services are dialled at their endpoints (pod IPs), as by an API server outside the pod network.
                "--enable-aggregator-routing=true",
                *self._aggregation_flags(pki_dir),
                f"--audit-policy-file={self._write_audit_policy()}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--v=1",
            ],
        )
        self.write_kubeconfig(self.kubeconfig, "admin", self.admin_token)
        wait_for("kube-apiserver /readyz", lambda: self._api_ok("/readyz"), 60, apiserver)

    @staticmethod
    def _aggregation_flags(pki_dir: Path) -> list[str]:
        """The aggregation layer, as kubeadm sets it up: the API server proxies an APIService's requests (OLM's
        PackageManifests) with the front-proxy client certificate and the caller's identity in these headers, and
        publishes the CA and the header names in kube-system/extension-apiserver-authentication for the extension
        API server to check them by."""
        return [
            f"--requestheader-client-ca-file={pki_dir / pki.FRONT_PROXY_CA_FILE}",
            f"--requestheader-allowed-names={pki.FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki_dir / pki.FRONT_PROXY_CERT_FILE}",
            f"--proxy-client-key-file={pki_dir / pki.FRONT_PROXY_KEY_FILE}",
        ]

    def _apiserver_address_flags(self) -> list[str]:
        """With a real node, pods reach the API server through the kubernetes Service at the node's address."""
        if self.real_node:
            return ["--bind-address=0.0.0.0", f"--advertise-address={NODE_IP}", "--kubelet-preferred-address-types=InternalIP"]
        return ["--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none"]

    def node_token(self, name: str) -> str:
        return self._component_token(f"node/{name}")

    @property
    def kube_proxy_token(self) -> str:
        return self._component_token("kube-proxy")

    @property
    def audit_log(self) -> Path:
        return self.workdir / "audit.log"

    def _write_audit_policy(self) -> Path:
        """Record who did what to pods (evictions included) so tests can count a client's requests, and
        everything ``audit_users`` do (a watch also when it starts), so tests can check their permissions."""
        every_request = [{"level": "Metadata", "users": list(self.audit_users)}] if self.audit_users else []
        policy = {
            "apiVersion": "audit.k8s.io/v1",
            "kind": "Policy",
            "omitStages": ["RequestReceived"],
            "rules": [
                *every_request,
                {"level": "Metadata", "resources": [{"group": "", "resources": ["pods", "pods/eviction"]}], "omitStages": ["ResponseStarted"]},
                {"level": "None"},
            ],
        }
        path = self.workdir / "audit-policy.yaml"
        path.write_text(yaml.safe_dump(policy))
        return path

    def audit_events(self, user: str | None = None, *, every_request: bool = False) -> list[dict[str, Any]]:
        """Audit events about pods recorded so far (answered requests), optionally only those of one user;
        with ``every_request``, all events recorded of ``audit_users``."""
        if not self.audit_log.exists():
            return []
        events = [json.loads(line) for line in self.audit_log.read_text().splitlines() if line.strip()]
        return [
            e for e in events
            if (user is None or e.get("user", {}).get("username") == user)
            and (every_request or (e.get("objectRef", {}).get("resource") == "pods" and e.get("stage") == "ResponseComplete"))
        ]

    def _component_token(self, name: str) -> str:
        if not hasattr(self, "_tokens"):
            self._tokens: dict[str, str] = {}
        return self._tokens.setdefault(name, secrets.token_hex(16))

    def _start_controllers(self, pki_dir: Path) -> None:
        kcm_config = self.workdir / "controller-manager.kubeconfig"
        self.write_kubeconfig(kcm_config, "system:kube-controller-manager", self._component_token("controller-manager"))
        self._spawn(
            "kube-controller-manager",
            [
                str(self.bin["kube-controller-manager"]),
                f"--kubeconfig={kcm_config}",
                f"--authentication-kubeconfig={kcm_config}",
                f"--authorization-kubeconfig={kcm_config}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                "--leader-elect=false",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={pki_dir / 'sa.key'}",
                f"--root-ca-file={pki_dir / 'ca.crt'}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--controllers={','.join(['*', *(f'-{name}' for name in UNUSED_CONTROLLERS)])}",
                "--v=1",
            ],
        )
        sched_config = self.workdir / "scheduler.kubeconfig"
        self.write_kubeconfig(sched_config, "system:kube-scheduler", self._component_token("scheduler"))
        self._spawn(
            "kube-scheduler",
            [
                str(self.bin["kube-scheduler"]),
                f"--kubeconfig={sched_config}",
                f"--authentication-kubeconfig={sched_config}",
                f"--authorization-kubeconfig={sched_config}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                "--leader-elect=false",
                "--v=1",
            ],
        )

    def _start_kwok(self) -> None:
        key, value = KWOK_SELECTOR
        stages = toolchain.module_source("kwok", "sigs.k8s.io/kwok") / "kustomize" / "stage"
        config = self.workdir / "kwok.yaml"
        config.write_text("\n---\n".join((stages / stage).read_text() for stage in KWOK_STAGES))
        self._spawn(
            "kwok",
            [
                str(self.bin["kwok"]),
                f"--kubeconfig={self.kubeconfig}",
                f"--config={config}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={key}={value}",
                f"--cidr={KWOK_POD_CIDR}",
                "--node-ip=10.240.0.1",
                "--node-lease-duration-seconds=40",
                f"--server-address=127.0.0.1:{free_port()}",
            ],
        )

    # ----------------------------------------------------------------- access
    def write_kubeconfig(self, path: Path, user: str, token: str) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": KUBECONFIG_CLUSTER, "cluster": {"server": self.server, "certificate-authority": str(self.ca_file)}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": KUBECONFIG_CLUSTER, "context": {"cluster": KUBECONFIG_CLUSTER, "user": user}}],
            "current-context": KUBECONFIG_CLUSTER,
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)

    def kubeconfig_via(self, source: Path, dest: Path, server: str) -> Path:
        """A copy of kubeconfig ``source`` (one this harness wrote) whose clients reach the API server at
        ``server`` instead, with the same TLS and user: kubectl edits it."""
        shutil.copyfile(source, dest)
        dest.chmod(0o600)
        self.kubectl("config", "set-cluster", KUBECONFIG_CLUSTER, f"--server={server}", kubeconfig=dest)
        return dest

    def _ssl(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def _api_ok(self, path: str) -> bool:
        request = urllib.request.Request(self.server + path, headers={"Authorization": f"Bearer {self.admin_token}"})
        try:
            with urllib.request.urlopen(request, context=self._ssl(), timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    @staticmethod
    def _http_ok(url: str) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def _root_ca_published(self) -> bool:
        result = self.kubectl("get", "configmap", "kube-root-ca.crt", "-n", "default", check=False)
        return result.returncode == 0

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, kubeconfig: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run the kubectl built with the cluster; raise with its stderr when ``check`` and it fails. A ``get … -o json``
        as the admin is answered in this process, as kubectl answers it (``reads``)."""
        read = self._reads().get(args) if kubeconfig is None and input is None and args[:1] == ("get",) else None
        checked = _server_validated(args)
        result = read or subprocess.run(
            [str(self.bin["kubectl"]), f"--kubeconfig={kubeconfig or self.kubeconfig}", *checked],
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, **GO_RUNTIME},
        )
        if check and result.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        if checked != args and result.returncode == 0 and UNKNOWN_FIELD in result.stderr:  # written, where kubectl's check refused it
            raise ClusterError(f"kubectl {' '.join(args)}: a manifest the test wrote has a field the API does not know:\n{result.stderr}")
        return result

    def _reads(self) -> Reads:
        if self._reader is None:
            self._reader = Reads(self.kubeconfig, self.workdir / "discovery.json")
        return self._reader

    def api_client(self, kubeconfig: Path | None = None) -> ApiClient:
        from kubernetes.config import new_client_from_config

        client: ApiClient = new_client_from_config(config_file=str(kubeconfig or self.kubeconfig))
        return client

    def etcd_get(self, key: str) -> bytes | None:
        """The raw value etcd holds for ``key``, through etcd's JSON gateway (no etcdctl needed)."""
        kvs = self._etcd_call("/v3/kv/range", {"key": base64.b64encode(key.encode()).decode()}).get("kvs") or []
        return base64.b64decode(kvs[0]["value"]) if kvs else None

    def etcd_compact(self) -> int:
        """Compact etcd's history up to its current revision (what the API server's compactor does every few
        minutes); a watch resuming from an older revision then ends with 410 Gone. Returns that revision."""
        revision = int(self._etcd_call("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"])
        self._etcd_call("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    def _etcd_call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(self.etcd_url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            answer: dict[str, Any] = json.load(response)
            return answer

    def service_account_kubeconfig(self, namespace: str, name: str) -> Path:
        """A kubeconfig authenticating as ServiceAccount ``namespace/name`` (created if missing)."""
        self.ensure_namespace(namespace)
        self.create_unless_present({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}})
        token = self.kubectl("create", "token", name, "-n", namespace, "--duration=24h").stdout.strip()
        path = self.workdir / f"sa-{namespace}-{name}.kubeconfig"
        self.write_kubeconfig(path, f"system:serviceaccount:{namespace}:{name}", token)
        return path

    def create_unless_present(self, manifest: dict[str, Any]) -> bool:
        """Create ``manifest``'s object; True if created, False if one of its name was already there.
        Through ``create -f`` (not ``create <kind>``, whose error text has no reason) so that the
        server's AlreadyExists is told apart from every other failure, which raises."""
        created = self.kubectl("create", "-f", "-", input=json.dumps(manifest), check=False)
        if created.returncode == 0:
            return True
        if "(AlreadyExists)" in created.stderr:
            return False
        raise ClusterError(f"kubectl create {manifest['kind']} {manifest['metadata']['name']} failed ({created.returncode}):\n{created.stderr}")

    def ensure_namespace(self, name: str, timeout: float = 120) -> None:
        """Make namespace ``name`` exist and be Active, creating it if absent. One still being deleted
        (Terminating: its create answers AlreadyExists, yet it takes no new object and is soon gone) is
        waited out and created afresh; any other failure raises."""

        def active() -> bool:
            phase = self.kubectl("get", "namespace", name, "-o", "jsonpath={.status.phase}", check=False)
            if phase.returncode == 0:
                return phase.stdout.strip() == "Active"
            if "(NotFound)" not in phase.stderr:
                raise ClusterError(f"kubectl get namespace {name} failed ({phase.returncode}):\n{phase.stderr}")
            # Not created means created or deleted meanwhile by someone else: look again.
            return self.create_unless_present({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

        def status() -> str:
            return self.kubectl("get", "namespace", name, "-o", "jsonpath={.status}", check=False).stdout

        wait_for(f"namespace {name} Active (a Terminating one gone first)", active, timeout, details=status)

    # ----------------------------------------------------------------- nodes
    def create_kwok_node(
        self,
        name: str,
        *,
        labels: dict[str, str] | None = None,
        taints: list[dict[str, Any]] | None = None,
        unschedulable: bool = False,
    ) -> None:
        key, value = KWOK_SELECTOR
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {key: value, "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                    **(labels or {}),
                },
            },
            "spec": {"taints": [*(taints or []), *([KWOK_TAINT] if self.real_node else [])], "unschedulable": unschedulable},
        }
        self.kubectl("create", "-f", "-", input=json.dumps(node))

    def node_ready(self, name: str) -> bool:
        out = self.kubectl("get", "node", name, "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}", check=False)
        return out.stdout.strip() == "True"

    def wait_node_ready(self, name: str, timeout: float = 60) -> None:
        wait_for(f"node {name} Ready", lambda: self.node_ready(name), timeout)


def _stop_on_sigterm() -> Callable[[], None]:
    """While a cluster runs, SIGTERM (a CI runner's timeout, `kill`) is taken as Ctrl-C: the program, a
    pytest session too, stops and unwinds, so the cluster's teardown runs. Returns what puts the previous
    handler back. Only the main thread can take signals, and a handler someone else installed is left alone."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return lambda: None

    def terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    def restore() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    signal.signal(signal.SIGTERM, terminate)
    return restore


def _server_validated(args: tuple[str, ...]) -> tuple[str, ...]:
    """A create, apply or replace of files with the fields checked by the API server (see UNKNOWN_FIELD), unless the
    caller chose how; any other command as it is."""
    files = any(arg in ("-f", "--filename") or arg.startswith("--filename=") for arg in args)
    if args[:1] in (("apply",), ("create",), ("replace",)) and files and not any(arg.startswith("--validate") for arg in args):
        return (args[0], "--validate=warn", *args[1:])
    return args
