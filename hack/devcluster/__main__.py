"""Command line: build the upstream tools, or run the local control plane until interrupted.

    python -m devcluster build [TOOL ...]   build (or reuse cached) binaries and print their paths
    python -m devcluster build --control-plane
                                            only those a KWOK control plane runs (etcd, the Kubernetes
                                            components, KWOK, kubectl): all the bench needs
    python -m devcluster images             build (or reuse cached) the Python bases and every release's operator
                                            image, which the tests push
    python -m devcluster up [--nodes N]     start the cluster, print its kubeconfig, wait for Ctrl-C
    python -m devcluster up --real-node     the same with a real kubelet node and a local image registry (root)
    python -m devcluster up --olm           the same with a real node, every image published to its registry, OLM
                                            (with its package server) and our catalog image as a CatalogSource
                                            (root); then
                                            `kubectl apply -f olm-deploy-manifests/kubernetes/nm-{ns,op-group,sub}.yaml`
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from node_maintenance_packaging.errors import PackagingError

from . import toolchain
from .cluster import COMPONENTS, Cluster
from .olm import OLM
from .publish import publish, warm_image_cache


def _build(names: list[str]) -> int:
    started = time.monotonic()
    for name, path in toolchain.ensure(names).items():
        print(f"{name}\t{path}")
    print(f"tools ready in {time.monotonic() - started:.1f}s", file=sys.stderr)
    return 0


def _images() -> int:
    started = time.monotonic()
    for kept in warm_image_cache():
        print(kept)
    print(f"images ready in {time.monotonic() - started:.1f}s", file=sys.stderr)
    return 0


def _up(nodes: int, with_olm: bool, real_node: bool) -> int:
    stop = threading.Event()
    # SIGTERM and SIGINT both end the run through the same clean teardown.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    with Cluster(real_node=real_node or with_olm) as cluster, contextlib.ExitStack() as stack:
        if with_olm:
            assert cluster.registry is not None
            published = publish(cluster.registry.host)
            print(f"images published to {published.registry} in {published.seconds:.1f}s")
            olm = OLM(cluster, Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nmo-olm-"))), published).start()
            stack.callback(olm.stop)
            print(f"OLM ready in {olm.startup_seconds:.1f}s; CatalogSource {olm.catalog_source} in namespace olm")
            olm.wait_package_listed()
            print(f"OperatorHub's PackageManifest API lists {olm.package} (kubectl get packagemanifests -n olm)")
        for index in range(nodes):
            cluster.create_kwok_node(f"kwok-node-{index}")
        for index in range(nodes):
            cluster.wait_node_ready(f"kwok-node-{index}")
        print(f"cluster ready in {cluster.startup_seconds:.1f}s; processes: {' '.join(map(str, cluster.pids()))}")
        if cluster.registry is not None:
            print(f"image registry (plain HTTP) at {cluster.registry.host}, pulled from by the real node")
        print(f"export KUBECONFIG={cluster.kubeconfig}", flush=True)
        stop.wait()
        print("stopping cluster", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devcluster", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build or reuse the pinned upstream binaries")
    build.add_argument("tools", nargs="*", help=f"any of: {', '.join(sorted(toolchain.BINARIES))} (default: all)")
    build.add_argument("--control-plane", action="store_true", help="only the control plane's tools: " + ", ".join(COMPONENTS))
    sub.add_parser("images", help="build or reuse the images the tests push: the Python bases, every release's operator image")
    up = sub.add_parser("up", help="run the local control plane until interrupted")
    up.add_argument("--nodes", type=int, default=2, help="KWOK nodes to create (default 2)")
    up.add_argument("--olm", action="store_true", help="also run OLM, installing from our images (implies --real-node)")
    up.add_argument("--real-node", action="store_true", help="add a real kubelet node (containerd, runc) and a local registry; needs root")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            return _build([*args.tools, *COMPONENTS] if args.control_plane else args.tools or sorted(toolchain.BINARIES))
        return _images() if args.command == "images" else _up(args.nodes, args.olm, args.real_node)
    except (RuntimeError, KeyError, PackagingError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
