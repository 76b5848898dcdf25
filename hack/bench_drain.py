"""Benchmark: the operator's drain against real `kubectl drain` on an identical node, in the same run.

Each round builds two identical KWOK nodes (a Deployment under a PodDisruptionBudget, bare pods and a
DaemonSet pod on each, a spare node per side for replacements), drains one with
`kubectl drain --ignore-daemonsets --delete-emptydir-data --force` and the other with a NodeMaintenance,
and reports both wall times and their ratio (operator / kubectl; below 1 means the operator is faster).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from devcluster.cluster import Cluster
from devcluster.operator import CRD_NAME, NAMESPACE, OperatorProcess, grant_csv_permissions, point_conversion_at

ROOT = Path(__file__).resolve().parents[1]
CRD_FILE = ROOT / "bundle" / "manifests" / "nodemaintenance.kubevirt.io_nodemaintenances.yaml"


def workload(namespace: str, pool: list[str], replicas: int, bare: int) -> list[dict]:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": pool}]}]
            }
        }
    }
    pod_spec = {"terminationGracePeriodSeconds": 1, "affinity": affinity, "containers": [{"name": "c", "image": "registry.invalid/app:1"}]}
    objects: list[dict] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "app", "namespace": namespace},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "app"}},
                "template": {"metadata": {"labels": {"app": "app"}}, "spec": pod_spec},
            },
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "app", "namespace": namespace},
            "spec": {"maxUnavailable": max(1, replicas // 4), "selector": {"matchLabels": {"app": "app"}}},
        },
    ]
    objects += [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"bare-{i}", "namespace": namespace}, "spec": {**pod_spec, "nodeName": pool[0]}}
        for i in range(bare)
    ]
    return objects


def prepare(cluster: Cluster, tag: str, replicas: int, bare: int) -> str:
    """A node full of pods and a spare node, cordoned until the pods have landed on the first."""
    node, spare = f"bench-{tag}", f"bench-{tag}-spare"
    cluster.create_kwok_node(node)
    cluster.create_kwok_node(spare, unschedulable=True)
    cluster.wait_node_ready(node)
    cluster.wait_node_ready(spare)
    items = workload(f"bench-{tag}", [node, spare], replicas, bare)
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    expected = replicas + bare
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        pods = json.loads(cluster.kubectl("get", "pods", "-n", f"bench-{tag}", "-o", "json").stdout)["items"]
        if sum(p["status"].get("phase") == "Running" for p in pods) == expected:
            break
        time.sleep(0.5)
    else:
        raise SystemExit(f"bench: pods on {node} did not all start")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the PDB must have observed the healthy pods before draining
        pdb = json.loads(cluster.kubectl("get", "pdb", "app", "-n", f"bench-{tag}", "-o", "json").stdout)
        if pdb.get("status", {}).get("currentHealthy") == replicas:
            break
        time.sleep(0.5)
    cluster.kubectl("uncordon", spare)
    return node


def drain_with_kubectl(cluster: Cluster, node: str) -> float:
    started = time.monotonic()
    cluster.kubectl("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--timeout=600s")
    return time.monotonic() - started


def drain_with_operator(cluster: Cluster, node: str) -> float:
    manifest = {
        "apiVersion": "nodemaintenance.kubevirt.io/v1beta1",
        "kind": "NodeMaintenance",
        "metadata": {"name": node},
        "spec": {"nodeName": node, "reason": "benchmark"},
    }
    started = time.monotonic()
    cluster.kubectl("create", "-f", "-", input=json.dumps(manifest))
    cluster.kubectl("wait", "--for=condition=Drained", f"nm/{node}", "--timeout=600s")
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=24, help="Deployment pods per node (PDB maxUnavailable 25%%)")
    parser.add_argument("--bare", type=int, default=6, help="pods without a controller per node")
    args = parser.parse_args()
    kubectl_times: list[float] = []
    operator_times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="nmo-bench-") as scratch, Cluster() as cluster:
        cluster.kubectl("apply", "--server-side", "-f", str(CRD_FILE))
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}")
        operator = OperatorProcess(cluster, Path(scratch), grant_csv_permissions(cluster, NAMESPACE))
        point_conversion_at(cluster, operator.webhook_url + "/convert", operator.ca_pem)
        operator.start()
        for round_ in range(args.rounds):
            reference = prepare(cluster, f"k{round_}", args.replicas, args.bare)
            candidate = prepare(cluster, f"o{round_}", args.replicas, args.bare)
            kubectl_times.append(drain_with_kubectl(cluster, reference))
            operator_times.append(drain_with_operator(cluster, candidate))
            print(
                f"round {round_ + 1}: kubectl drain {kubectl_times[-1]:.2f}s, "
                f"NodeMaintenance {operator_times[-1]:.2f}s, ratio {operator_times[-1] / kubectl_times[-1]:.2f}",
                flush=True,
            )
        operator.stop()
    pods = args.replicas + args.bare
    k, o = statistics.median(kubectl_times), statistics.median(operator_times)
    print(f"drain of {pods} pods per node, median of {args.rounds}: kubectl {k:.2f}s, operator {o:.2f}s, ratio {o / k:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
