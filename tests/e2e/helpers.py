"""Small helpers for end-to-end tests: polling with deadlines and JSON in/out through kubectl."""

from __future__ import annotations

import contextlib
import datetime
import itertools
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Self, TypeVar, cast

from devcluster.cluster import KWOK_TAINT, Cluster
from devcluster.operator import USER as OPERATOR_USER
from devcluster.operator import OperatorProcess
from devcluster.waiting import ClusterError, polls, wait_for
from node_maintenance.api import CRD_NAME, GROUP, POLICY
from node_maintenance.api.paths import POLICY_VERSION
from node_maintenance.coordination import remediation

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]
NM = "nodemaintenances.v1beta1.nodemaintenance.kubevirt.io"
NMP = f"{POLICY.plural}.{POLICY_VERSION}.{GROUP}"
CRD_FILE = ROOT / "bundle" / "manifests" / "nodemaintenance.kubevirt.io_nodemaintenances.yaml"
POLICY_CRD_FILE = ROOT / "bundle" / "manifests" / f"{GROUP}_{POLICY.plural}.yaml"
NAMESPACE_MANIFEST = ROOT / "olm-deploy-manifests" / "kubernetes" / "nm-ns.yaml"
# A wait at least this long is named in the test report with its length (build/test-report.xml).
LONG_WAIT_SECONDS = 5.0
# Test workloads run on KWOK nodes, which carry this taint in a cluster with a real node.
KWOK_TOLERATION = {"key": KWOK_TAINT["key"], "operator": "Exists", "effect": KWOK_TAINT["effect"]}
# What a pod needs to pass the `restricted` Pod Security Standard (the operator's namespace enforces it).
RESTRICTED_POD = {"runAsNonRoot": True, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def eventually(check: Callable[[], T | Literal[False] | None], what: str, timeout: float = 60, interval: float | None = None) -> T:
    """Poll until ``check`` returns something truthy; fail naming ``what`` at the deadline. Polls slow down
    as ``devcluster.waiting.pauses`` does, unless ``interval`` fixes the pace (to catch a passing state)."""
    last: T | Literal[False] | None = None
    started = time.monotonic()
    for _ in polls(timeout, None if interval is None else itertools.repeat(interval)):
        last = check()
        if last:
            if (waited := time.monotonic() - started) >= LONG_WAIT_SECONDS:
                print(f"waited {waited:.1f}s for {what}")  # in the test report: where a slow test's time went
            return last
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def apply(cluster: Cluster, *objects: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}))


def get(cluster: Cluster, *args: str) -> dict[str, Any] | None:
    """The object or list ``args`` name, None when it does not exist. Any other failure is the test's, with
    kubectl's words: an absent object and an API server that did not answer are different findings."""
    result = cluster.kubectl("get", *args, "-o", "json", check=False)
    if result.returncode == 0:
        return cast(dict[str, Any], json.loads(result.stdout))
    if "(NotFound)" in result.stderr or "doesn't have a resource type" in result.stderr:
        return None
    raise AssertionError(f"kubectl get {' '.join(args)} failed: {result.stderr.strip()}")


def remove_crds(cluster: Cluster, names: Iterable[str]) -> None:
    """Delete the objects of each CRD named (finalizers too: no operator is left to run them), and the CRDs: what an
    install that starts with none of our CRDs needs, whatever an earlier test's operator did on its way out."""
    for name in names:
        found = cluster.kubectl("get", "crd", name, check=False)
        if found.returncode != 0:
            if "(NotFound)" not in found.stderr:
                raise ClusterError(f"kubectl get crd {name} failed:\n{found.stderr}")
            continue
        # A webhook in it has gone with the operator: read the objects without conversion. The API server
        # rebuilds the resource's storage after that change and answers 429 meanwhile (see point_conversion_at).
        cluster.kubectl("patch", "crd", name, "--type=merge", "-p", json.dumps({"spec": {"conversion": {"strategy": "None", "webhook": None}}}))
        listed = wait_for(f"{name} listed without conversion",
                          lambda: (result := cluster.kubectl("get", name, "-o", "name", check=False)).returncode == 0 and result, 30,
                          details=lambda: cluster.kubectl("get", name, "-o", "name", check=False).stderr)
        for obj in listed.stdout.split():
            patched = cluster.kubectl("patch", obj, "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False)
            if patched.returncode != 0 and "(NotFound)" not in patched.stderr:  # gone meanwhile is what the patch is for
                raise ClusterError(f"removing the finalizers of {obj} failed:\n{patched.stderr}")
        cluster.kubectl("delete", "crd", name, "--timeout=120s")


def pods_on(cluster: Cluster, node: str) -> list[dict[str, Any]]:
    listing = get(cluster, "pods", "-A", "--field-selector", f"spec.nodeName={node}")
    return listing["items"] if listing else []


def pods_running(cluster: Cluster, namespace: str, count: int) -> None:
    """Wait until ``count`` pods of ``namespace`` run (or have run to completion)."""
    def ready() -> bool:
        listing = get(cluster, "pods", "-n", namespace)
        return listing is not None and sum(p["status"].get("phase") in ("Running", "Succeeded") for p in listing["items"]) >= count

    eventually(ready, f"{count} pods running in {namespace}")


def evictions(cluster: Cluster, namespace: str, code: int | None = None) -> list[dict[str, Any]]:
    """The evictions the operator asked for in ``namespace`` (those answered ``code`` only, if given), from the audit log."""
    return [
        e
        for e in cluster.audit_events(OPERATOR_USER)
        if e.get("objectRef", {}).get("subresource") == "eviction"
        and e["objectRef"].get("namespace") == namespace
        and (code is None or e.get("responseStatus", {}).get("code") == code)
    ]


def crd_of_release(version: str, out: Path) -> Path:
    """The NodeMaintenance CRD as release ``version`` shipped it, rendered into ``out``."""
    subprocess.run(
        [sys.executable, "-m", "node_maintenance_packaging.cli", "bundle", "--root", str(ROOT), "--release", version, "--out", str(out)],
        check=True, capture_output=True,
    )
    return out / "bundle" / "manifests" / CRD_FILE.name


def replace_crd(cluster: Cluster, crd_file: Path) -> None:
    """Delete the NodeMaintenance CRD (and with it every NodeMaintenance) and install ``crd_file`` in its place."""
    cluster.kubectl("delete", "crd", CRD_NAME, "--ignore-not-found", "--timeout=120s")
    cluster.kubectl("apply", "--server-side", "-f", str(crd_file))
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s")


def nm(cluster: Cluster, name: str) -> dict[str, Any] | None:
    return get(cluster, NM, name)


def nm_status(cluster: Cluster, name: str) -> dict[str, Any]:
    obj = nm(cluster, name)
    return (obj or {}).get("status") or {}


def create_nm(cluster: Cluster, name: str, node: str, **drain: Any) -> None:
    spec: dict[str, Any] = {"nodeName": node, "reason": "e2e"}
    if drain:
        spec["drain"] = drain
    apply(cluster, {"apiVersion": "nodemaintenance.kubevirt.io/v1beta1", "kind": "NodeMaintenance", "metadata": {"name": name}, "spec": spec})


def replan(cluster: Cluster, name: str, times: int = 3) -> None:
    """Changes of the NodeMaintenance make its engine plan again, once a second."""
    for round_ in range(times):
        cluster.kubectl("annotate", NM, name, f"e2e/replan={round_}", "--overwrite")
        time.sleep(1)


def install_policy_crd(cluster: Cluster) -> None:
    """The NodeMaintenancePolicy CRD as the bundle ships it, established (it stays for the session)."""
    cluster.kubectl("apply", "--server-side", "-f", str(POLICY_CRD_FILE))
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{POLICY.crd_name}", "--timeout=60s")


def policy_status(cluster: Cluster, name: str) -> dict[str, Any]:
    return (get(cluster, NMP, name) or {}).get("status") or {}


def delete_nm(cluster: Cluster, name: str) -> None:
    cluster.kubectl("delete", NM, name, "--ignore-not-found", "--timeout=60s")


def pod(name: str, namespace: str, node: str, **extra: Any) -> dict[str, Any]:
    spec = {"nodeName": node, "terminationGracePeriodSeconds": 1, "tolerations": [KWOK_TOLERATION],
            "containers": [{"name": "c", "image": "registry.invalid/app:1"}]}
    spec.update(extra.pop("spec", {}))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, **extra}, "spec": spec}


def pinned(pool: list[str]) -> dict[str, Any]:
    """Pod affinity to a set of nodes (the node under test and its spare)."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": pool}]}]
            }
        }
    }


def deployment(name: str, namespace: str, pool: list[str], replicas: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    labels = labels or {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"terminationGracePeriodSeconds": 1, "affinity": pinned(pool), "tolerations": [KWOK_TOLERATION],
                         "containers": [{"name": "c", "image": "registry.invalid/app:1"}]},
            },
        },
    }


def daemonset(name: str, namespace: str, pool: list[str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A DaemonSet with a pod on each node of ``pool`` (the nodes under test only)."""
    labels = labels or {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"terminationGracePeriodSeconds": 1, "affinity": pinned(pool), "tolerations": [KWOK_TOLERATION],
                         "containers": [{"name": "c", "image": "registry.invalid/agent:1"}]},
            },
        },
    }


def pdb(name: str, namespace: str, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": namespace}, "spec": {"selector": {"matchLabels": labels}, **spec}}


def foreign_lease(node_name: str, seconds: int, holder: str = "NodeHealthCheck") -> dict[str, Any]:
    """The node's remediation Lease as a remediation operator holds it: renewed now, for ``seconds``."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": remediation.lease_name(node_name), "namespace": remediation.DEFAULT_LEASE_NAMESPACE},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": seconds, "renewTime": now, "acquireTime": now}}


def existing(cluster: Cluster, *args: str) -> dict[str, Any]:
    """The object or list ``args`` name, which the test expects to be there."""
    obj = get(cluster, *args)
    assert obj is not None, f"{' '.join(args)} missing"
    return obj


def node(cluster: Cluster, name: str) -> dict[str, Any]:
    return existing(cluster, "node", name)


def our_taint(node_obj: dict[str, Any]) -> bool:
    return any(t["key"] == "kubevirt.io/drain" and t["effect"] == "NoSchedule" for t in node_obj["spec"].get("taints") or [])


# ----------------------------------------------------------------- policies
def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), {})


def watch_events(stop: threading.Event, list_call: Callable[..., Any], on_event: Callable[[dict[str, Any]], None], **kwargs: Any) -> None:
    """Every event of a list+watch until ``stop``, resuming each short watch where the last one ended, so no
    change is lost between them (a fresh listing only after the server has forgotten that version)."""
    from kubernetes import watch
    from kubernetes.client.exceptions import ApiException

    version = None
    while not stop.is_set():
        stream = watch.Watch()
        try:
            for event in stream.stream(list_call, timeout_seconds=3, **({"resource_version": version} if version else {}), **kwargs):
                version = event["object"].metadata.resource_version
                on_event(event)
        except ApiException as error:
            if error.status != 410:
                raise
            version = None


def a_pool() -> dict[str, str]:
    """A label of nodes of one test's own (a pool a policy selects)."""
    return {"e2e-pool": uuid.uuid4().hex[:8]}


class BackgroundWatch:
    """A watch run in a thread for the length of a ``with`` block; a subclass names what it lists
    (``listing``) and takes each event (``take``). The block starts once the first event has come."""

    what = "object"

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.events = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        eventually(lambda: self.events > 0, f"the {self.what} watch to start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def listing(self) -> tuple[Callable[..., Any], dict[str, Any]]:
        raise NotImplementedError

    def take(self, event: dict[str, Any]) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        list_objects, arguments = self.listing()
        watch_events(self._stop, list_objects, self._seen, **arguments)

    def _seen(self, event: dict[str, Any]) -> None:
        self.take(event)
        self.events += 1


class CordonWatch(BackgroundWatch):
    """Every change of the pool's nodes, as a watch sees it: how many were cordoned at once, and in which order."""

    what = "node"

    def __init__(self, cluster: Cluster, selector: dict[str, str]) -> None:
        super().__init__(cluster)
        self.selector = ",".join(f"{k}={v}" for k, v in selector.items())
        self.cordoned: set[str] = set()
        self.order: list[str] = []  # in the order they were cordoned
        self.released: list[str] = []  # in the order they were uncordoned
        self.most = 0
        self.moments: list[frozenset[str]] = []  # the cordoned nodes after each change

    def listing(self) -> tuple[Callable[..., Any], dict[str, Any]]:
        from kubernetes import client

        return client.CoreV1Api(self.cluster.api_client()).list_node, {"label_selector": self.selector}

    def take(self, event: dict[str, Any]) -> None:
        node_obj = event["object"]
        name = node_obj.metadata.name
        if node_obj.spec.unschedulable and event["type"] != "DELETED":
            if name not in self.cordoned:
                self.order.append(name)
            self.cordoned.add(name)
        elif name in self.cordoned:
            self.cordoned.discard(name)
            self.released.append(name)
        self.most = max(self.most, len(self.cordoned))
        self.moments.append(frozenset(self.cordoned))


# ----------------------------------------------------------------- kubectl nm
PLUGIN_DIR = Path(sys.executable).parent  # where the package installed kubectl-nm
# The ServiceAccount an admin's kubeconfig logs in as, in the kubeconfig tests, and its user name.
PLUGIN_ACCOUNT = ("kubectl-nm-users", "admin")
PLUGIN_USER = f"system:serviceaccount:{PLUGIN_ACCOUNT[0]}:{PLUGIN_ACCOUNT[1]}"


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> dict[str, Any]:
        return cast(dict[str, Any], json.loads(self.out))


def plugin_env(cluster: Cluster, kubeconfig: Path | None = None) -> dict[str, str]:
    """kubectl and kubectl-nm on PATH, KUBECONFIG pointing at the local cluster (or at ``kubeconfig``)."""
    path = f"{cluster.bin['kubectl'].parent}{os.pathsep}{PLUGIN_DIR}{os.pathsep}{os.environ['PATH']}"
    return {**os.environ, "PATH": path, "KUBECONFIG": str(kubeconfig or cluster.kubeconfig)}


def kubectl_nm(cluster: Cluster, *args: str, timeout: float = 120, kubeconfig: Path | None = None,
               env: dict[str, str] | None = None) -> Run:
    """``kubectl nm ARGS`` through kubectl's plugin lookup, as a user types it (``env`` added to the environment)."""
    done = subprocess.run(["kubectl", "nm", *args], env={**plugin_env(cluster, kubeconfig), **(env or {})},
                          capture_output=True, text=True, timeout=timeout)
    return Run(done.returncode, done.stdout, done.stderr)


@contextlib.contextmanager
def standing_in(cluster: Cluster, session_operator: OperatorProcess, kubeconfig: Path, workdir: Path, identity: str) -> Iterator[OperatorProcess]:
    """An operator of a test's own, reaching the API server as ``kubeconfig`` says, while the session's stands
    down (two would share the work). It takes the session operator's webhook port and certificate, so the
    CRD's conversion keeps working; the session's operator starts again afterwards."""
    session_operator.stop()
    process = OperatorProcess(cluster, workdir, kubeconfig, identity=identity, cert_dir=session_operator.cert_dir,
                              webhook_port=session_operator.webhook_port)
    try:
        process.start()
        yield process
    finally:
        process.stop()
        session_operator.start()
