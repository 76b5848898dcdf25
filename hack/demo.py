"""The main job, end to end on a local control plane: a node with workloads goes into maintenance and back.

Starts etcd, kube-apiserver, controllers, scheduler and KWOK; installs the CRD from bundle/; runs the
operator under the CSV's RBAC; puts a node into maintenance, shows the drain honouring a
PodDisruptionBudget, then ends the maintenance. Everything is torn down at the end (or on Ctrl-C).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from devcluster.cluster import Cluster
from devcluster.operator import CRD_NAME, NAMESPACE, OperatorProcess, grant_csv_permissions, point_conversion_at

ROOT = Path(__file__).resolve().parents[1]
CRD_FILE = ROOT / "bundle" / "manifests" / "nodemaintenance.kubevirt.io_nodemaintenances.yaml"

WORKLOAD = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 2
      containers: [{name: web, image: registry.invalid/web:1}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  minAvailable: 3
  selector: {matchLabels: {app: web}}
"""

MAINTENANCE = """
apiVersion: nodemaintenance.kubevirt.io/v1beta1
kind: NodeMaintenance
metadata: {name: node02-maintenance}
spec:
  nodeName: node02
  reason: "Replace the NIC"
"""


def step(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def show(cluster: Cluster, *args: str) -> None:
    print(cluster.kubectl(*args).stdout.rstrip(), flush=True)


def wait_for(what: str, check, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"demo failed: timed out waiting for {what}")
        time.sleep(0.5)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="nmo-demo-") as scratch, Cluster() as cluster:
        step(f"local control plane ready in {cluster.startup_seconds:.1f}s")
        for name in ("node01", "node02", "node03"):
            cluster.create_kwok_node(name)
        for name in ("node01", "node02", "node03"):
            cluster.wait_node_ready(name)
        show(cluster, "get", "nodes")

        step("install the CRD from bundle/ and run the operator under the CSV's RBAC")
        cluster.kubectl("apply", "--server-side", "-f", str(CRD_FILE))
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}")
        operator = OperatorProcess(cluster, Path(scratch), grant_csv_permissions(cluster, NAMESPACE))
        point_conversion_at(cluster, operator.webhook_url + "/convert", operator.ca_pem)
        operator.start()

        step("a Deployment of 4 replicas under a PodDisruptionBudget (minAvailable 3)")
        cluster.kubectl("apply", "-f", "-", input=WORKLOAD)
        wait_for("4 available replicas", lambda: cluster.kubectl(
            "get", "deploy", "web", "-o", "jsonpath={.status.availableReplicas}").stdout == "4")
        show(cluster, "get", "pods", "-o", "wide")

        step("put node02 into maintenance")
        print(MAINTENANCE.strip())
        cluster.kubectl("apply", "-f", "-", input=MAINTENANCE)
        cluster.kubectl("wait", "--for=condition=Drained", "nm/node02-maintenance", "--timeout=120s")
        show(cluster, "get", "nm")
        show(cluster, "get", "nm", "node02-maintenance", "-o", "jsonpath={.status}")
        print()
        show(cluster, "get", "node", "node02", "-o", "jsonpath={.spec}")
        print()
        show(cluster, "get", "pods", "-o", "wide")
        show(cluster, "get", "events", "-A", "--field-selector", "involvedObject.name=node02-maintenance")

        step("the same object read through the deprecated v1alpha1 API")
        show(cluster, "get", "nodemaintenances.v1alpha1.nodemaintenance.kubevirt.io", "node02-maintenance", "-o", "yaml")

        step("end the maintenance: delete the NodeMaintenance")
        cluster.kubectl("delete", "nm", "node02-maintenance", "--timeout=60s")
        node = json.loads(cluster.kubectl("get", "node", "node02", "-o", "json").stdout)
        print(f"node02 unschedulable: {node['spec'].get('unschedulable', False)}; taints: {node['spec'].get('taints', [])}")

        step("operator log (last lines)")
        print("\n".join(operator.logs().splitlines()[-8:]))
        operator.stop()
        step("tearing down the local control plane")
    return 0


if __name__ == "__main__":
    sys.exit(main())
