"""A drain any operator install must pass on the real-node cluster: a NodeMaintenance takes a KWOK node whose pods run
there, drains it and gives it back when deleted."""

from __future__ import annotations

import json
import uuid

from devcluster.cluster import KWOK_TAINT, Cluster
from node_maintenance.api import GROUP, PLURAL

from ..helpers import deployment as deployment_of
from ..helpers import existing, our_taint
from ..helpers import node as node_of


def drain_a_kwok_node(cluster: Cluster, api_version: str) -> None:
    """A NodeMaintenance of ``api_version`` drains a KWOK node and gives it back when deleted."""
    suffix = uuid.uuid4().hex[:6]
    target, spare = f"kwok-{suffix}", f"kwok-spare-{suffix}"
    namespace = f"work-{suffix}"
    cluster.create_kwok_node(target)
    cluster.wait_node_ready(target)
    cluster.kubectl("create", "namespace", namespace)
    workload = deployment_of("app", namespace, [target, spare], 3)
    workload["spec"]["template"]["spec"]["tolerations"] = [{**KWOK_TAINT, "operator": "Equal"}]
    cluster.kubectl("apply", "-f", "-", input=json.dumps(workload))
    cluster.kubectl("rollout", "status", "-n", namespace, "deployment/app", "--timeout=60s")
    # The spare appears only now, so all three pods started on the node under test.
    cluster.create_kwok_node(spare)
    cluster.wait_node_ready(spare)
    nm = {"apiVersion": f"{GROUP}/{api_version}", "kind": "NodeMaintenance", "metadata": {"name": f"nm-{suffix}"},
          "spec": {"nodeName": target, "reason": "image test"}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(nm))
    cluster.kubectl("wait", f"{PLURAL}.{api_version}.{GROUP}/nm-{suffix}", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=90s")
    drained = node_of(cluster, target)
    assert drained["spec"].get("unschedulable") and our_taint(drained)
    left = existing(cluster, "pods", "-n", namespace, "--field-selector", f"spec.nodeName={target}")["items"]
    assert left == [] or all(p["metadata"].get("deletionTimestamp") for p in left)
    cluster.kubectl("delete", f"{PLURAL}.{api_version}.{GROUP}", f"nm-{suffix}", "--timeout=60s")
    released = node_of(cluster, target)
    assert not released["spec"].get("unschedulable") and not our_taint(released)
