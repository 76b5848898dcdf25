"""`make demo`: the Node Maintenance Operator the way a cluster admin lives it, on a local cluster.

A control plane with a real node and KWOK workers; a workload on one worker; our images built and
pushed to the cluster's registry and OLM started; the four deploy manifests applied, so that OLM
installs the operator from our catalog image; a NodeMaintenance drains the worker under its
PodDisruptionBudgets, live; deleting it hands the node back. Then everything is torn down, or with
``--keep`` left running until Ctrl-C. The words on screen also go to a Markdown transcript.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape

from devcluster.cluster import Cluster
from devcluster.olm import OLM
from devcluster.processes import identify, survivors
from devcluster.publish import Published, publish
from devcluster.realnode import NAME as REAL_NODE
from devcluster.waiting import ClusterError, wait_for
from node_maintenance.drain import nodes
from node_maintenance_cli.cluster import Cluster as Client
from node_maintenance_cli.commands import maintenance_object

from . import install, kubevirt, progress, workload
from .narrator import Narrator
from .phases import Phases

WORKERS = [f"kwok-worker-{n}" for n in range(1, 5)]
TARGET = WORKERS[0]
REASON = "Replace the NIC"
NODE_COLUMNS = "NODE:.metadata.name,UNSCHEDULABLE:.spec.unschedulable,TAINTS:.spec.taints[*].key"
POD_COLUMNS = "POD:.metadata.name,NODE:.spec.nodeName,PHASE:.status.phase"


class Demo:
    """The story, step by step; ``stack`` tears down whatever has been started, newest first."""

    def __init__(self, narrator: Narrator, phases: Phases, stack: contextlib.ExitStack) -> None:
        self.say = narrator.say
        self.narrator = narrator
        self.phases = phases
        self.stack = stack
        self.cluster: Cluster
        self.published: Published
        self.olm: OLM | None = None

    def show(self, *args: str) -> str:
        """Run kubectl and show the command line and its output."""
        out = self.cluster.kubectl(*args).stdout
        self.narrator.block(out, command=" ".join(["kubectl", *(a if " " not in a else f"'{a}'" for a in args)]))
        return out

    def run(self) -> None:
        self.start_cluster()
        self.deploy_workload()
        self.start_olm()
        self.install_operator()
        name = self.maintain()
        self.hand_back(name)

    def start_cluster(self) -> None:
        self.narrator.step("A local cluster: a real node and four KWOK worker nodes")
        with self.phases.timed("cluster start"):
            self.cluster = self.stack.enter_context(Cluster(real_node=True))
            assert self.cluster.registry is not None
            self.narrator.hide(str(self.cluster.workdir), "<cluster directory>")
            self.narrator.hide(self.cluster.registry.host, "<local registry>")
            for name in WORKERS:
                self.cluster.create_kwok_node(name, labels={workload.WORKER_ROLE: ""})
            for name in WORKERS:
                self.cluster.wait_node_ready(name)
        self.say(f"etcd, kube-apiserver, controller-manager and scheduler run on this machine; {REAL_NODE} is a real "
                 "node (kubelet, containerd, runc) that pulls from the cluster's own image registry, and KWOK "
                 f"simulates the kubelets of {', '.join(WORKERS)}, whose {workload.KWOK_TOLERATION['key']} taint "
                 "keeps everything but the demo's workload off them.")
        self.show("get", "nodes", "-o", f"custom-columns={NODE_COLUMNS}")

    def deploy_workload(self) -> None:
        self.narrator.step(f"A workload on {TARGET}")
        self.say(workload.describe())
        self.say(kubevirt.describe())
        objects = workload.objects(TARGET) + kubevirt.objects(TARGET)
        expected = workload.expected_pods(objects, len(WORKERS))
        namespaces = (workload.APPS, kubevirt.NAMESPACE)
        with self.phases.timed("workload"):
            # The other workers are cordoned meanwhile, so the whole workload starts on the target.
            self.cluster.kubectl("cordon", *WORKERS[1:])
            self.cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
            wait_for(f"{expected} workload pods Ready",
                     lambda: sum(workload.ready(self._pods(ns)) for ns in namespaces) == expected, 90)
            self.cluster.kubectl("uncordon", *WORKERS[1:])
        self.say(f"(The other workers were cordoned while it started, so that all of it runs on {TARGET}.)")
        self.show("get", "pods", "--all-namespaces", "--field-selector", f"spec.nodeName={TARGET}", "-o",
                  "custom-columns=NAMESPACE:.metadata.namespace,POD:.metadata.name,OWNER:.metadata.ownerReferences[0].kind")
        self.show("get", "pdb", "--all-namespaces", "-o", "custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,"
                  "MIN AVAILABLE:.spec.minAvailable,MAX UNAVAILABLE:.spec.maxUnavailable,ALLOWED DISRUPTIONS:.status.disruptionsAllowed")

    def _pods(self, namespace: str) -> list[dict[str, Any]]:
        pods: list[dict[str, Any]] = json.loads(self.cluster.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]
        return pods

    def start_olm(self) -> None:
        self.narrator.step("Our images in the cluster's registry, and OLM")
        assert self.cluster.registry is not None
        with self.phases.timed("publish images"), self.narrator.waiting("building and pushing the images"):
            published = publish(self.cluster.registry.host)
        self.narrator.say_took("Built and pushed in {}, as a release build does (nmo-pack images --all-releases "
                               "--pin-digests): every release's operator and bundle image, the catalog image, and OLM's "
                               "util and opm images from their pinned modules.", published.seconds)
        self.narrator.block("\n".join(f"{b.reference}  {b.digest[:19]}" for b in published.built))
        with self.phases.timed("OLM ready"), self.narrator.waiting("starting OLM; its registry pod serves our catalog image"):
            workdir = Path(self.stack.enter_context(tempfile.TemporaryDirectory(prefix="nmo-demo-olm-")))
            self.olm = OLM(self.cluster, workdir, published).start()
            self.stack.callback(self.olm.stop)
        self.published = published
        self.say("OLM's olm and catalog operators run with upstream's arguments. OLM was started with our "
                 "CatalogSource and has reached the catalog image's registry pod on the real node.")

    def install_operator(self) -> None:
        self.narrator.step("Install the operator with OLM, from the four deploy manifests")
        objects = install.manifests(self.published.registry)
        source = next(o for o in objects if o["kind"] == "CatalogSource")
        self.say("The Namespace, OperatorGroup, CatalogSource and Subscription of olm-deploy-manifests/kubernetes/, "
                 f"exactly as committed but for the registry of the CatalogSource's image: {source['spec']['image']}. "
                 "(The CatalogSource is unchanged: OLM was started with it.)")
        self.show_apply(objects, "olm-deploy-manifests/kubernetes/")
        subscription = objects[-1]
        namespace = subscription["metadata"]["namespace"]
        with self.phases.timed("CSV Succeeded"), self.narrator.log() as log:
            csv = install.wait_installed(self.cluster, subscription, log)
        self.say(f"OLM resolved the Subscription from our catalog, unpacked our bundle image and runs "
                 f"{csv['metadata']['name']}: the CSV is Succeeded and the operator's pod Ready.")
        self.show("get", "csv", "-n", namespace)
        self.show("get", "pods", "-n", namespace, "-o", "custom-columns=POD:.metadata.name,READY:.status.containerStatuses[*].ready,"
                  "NODE:.spec.nodeName,IMAGE:.spec.containers[*].image")

    def show_apply(self, objects: list[dict[str, Any]], shown_as: str) -> None:
        out = self.cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})).stdout
        self.narrator.block(out, command=f"kubectl apply -f {shown_as}")

    def maintain(self) -> str:
        self.narrator.step(f"Put {TARGET} into maintenance")
        body = maintenance_object(f"{TARGET}-maintenance", TARGET, REASON, None, None, None)
        name: str = body["metadata"]["name"]
        self.narrator.block(yaml.safe_dump(body, sort_keys=False), command=f"cat {name}.yaml")
        migration = kubevirt.Migration(self.cluster, TARGET)
        migration.start()
        self.stack.callback(migration.stop)
        client = Client(kubeconfig=str(self.cluster.kubeconfig))

        def check() -> None:
            if migration.error is not None:
                raise RuntimeError(f"the stand-in for KubeVirt failed: {migration.error}")

        with self.phases.timed("drain"):
            self.show_apply([body], f"{name}.yaml")
            self.say(f"The operator cordons {TARGET}, taints it {nodes.TAINT['key']}:{nodes.TAINT['effect']} and evicts "
                     "its pods through the Eviction API, as fast as their budgets allow:")
            progress.watch(lambda: client.maintenance(name), self.narrator, f"draining {TARGET}", migration.said, check)
        self.show("get", "nm")
        self.show("get", "node", TARGET, "-o", f"custom-columns={NODE_COLUMNS}")
        self.say(f"Left on {TARGET}: the DaemonSet's pod, as with kubectl drain --ignore-daemonsets. The rest was "
                 f"rescheduled on the other workers, but {workload.BARE}, which nothing recreates (kubectl drain --force).")
        self.show("get", "pods", "--all-namespaces", "--field-selector", f"spec.nodeName={TARGET}",
                  "-o", "custom-columns=NAMESPACE:.metadata.namespace,POD:.metadata.name")
        self.show("get", "pods", "-n", workload.APPS, "-o", f"custom-columns={POD_COLUMNS}")
        self.show("get", "pods", "-n", kubevirt.NAMESPACE, "-o", f"custom-columns={POD_COLUMNS}")
        return name

    def hand_back(self, name: str) -> None:
        self.narrator.step(f"End the maintenance: {TARGET} is handed back")
        with self.phases.timed("handback"):
            self.show("delete", "nm", name, "--timeout=60s")
            wait_for(f"{TARGET} schedulable and without {nodes.TAINT['key']}", self._handed_back, 30)
        self.show("get", "node", TARGET, "-o", f"custom-columns={NODE_COLUMNS}")
        self.say(f"{TARGET} is schedulable again and the {nodes.TAINT['key']} taint is gone; the taint left is KWOK's own.")

    def _handed_back(self) -> bool:
        node = json.loads(self.cluster.kubectl("get", "node", TARGET, "-o", "json").stdout)
        return not node["spec"].get("unschedulable") and not nodes.has_taint(node)

    def keep(self) -> None:
        self.narrator.step("The cluster stays up")
        kubectl = self.cluster.bin["kubectl"]
        self.narrator.hide(str(kubectl.parent), "<tools cache>")
        self.say(f"It runs until Ctrl-C. Use it with any kubectl, such as the one built for it ({kubectl}):")
        self.narrator.block(f"export KUBECONFIG={self.cluster.kubeconfig}")
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)

    def pids(self) -> list[int]:
        """Every process the demo started: the cluster's, its node's and registry's, OLM's."""
        return self.cluster.pids() + (self.olm.pids() if self.olm is not None else [])

    def diagnostics(self) -> str:
        return self.olm.logs(30) if self.olm is not None else ""


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="leave the cluster running (until Ctrl-C) and print its KUBECONFIG line")
    parser.add_argument("--transcript", type=Path, help="write the Markdown transcript here")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)  # a clean teardown on SIGTERM as on Ctrl-C
    narrator = Narrator(Console())
    phases = Phases()
    try:
        with contextlib.ExitStack() as stack:
            demo = Demo(narrator, phases, stack)
            try:
                demo.run()
            except Exception as error:  # torn down all the same, by the stack; said plainly, traced when unforeseen
                narrator.screen.print(f"[red]demo failed: {escape(str(error))}", highlight=False, soft_wrap=True)
                if not isinstance(error, (ClusterError, RuntimeError)):
                    narrator.screen.print_exception()
                narrator.screen.print(demo.diagnostics(), markup=False, highlight=False)
                return 1
            if args.keep:
                demo.keep()
            narrator.step("Tear down")
            processes, workdir = identify(demo.pids()), demo.cluster.workdir
            with phases.timed("teardown"):
                stack.close()
    except KeyboardInterrupt:
        narrator.screen.print("interrupted: torn down")
        return 130
    left = survivors(processes)
    if left or workdir.exists():
        narrator.screen.print(f"[red]demo failed: left after teardown: processes {left}, directory {workdir.exists()}")
        return 1
    narrator.say(f"The {len(processes)} processes of the cluster, its real node, its registry and OLM are stopped, and the "
                 "cluster's directory is removed.")
    narrator.screen.print(phases.table())
    narrator.record("Time per phase:\n\n```text\n" + phases.plain() + "\n```")
    if args.transcript:
        narrator.write(args.transcript)
        narrator.screen.print(f"transcript: {args.transcript}", highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
