"""The cluster's own network and mount namespaces, where a real node runs and nothing touches the host.

The kubelet's pods get addresses on a bridge, kube-proxy writes its rules, CoreDNS answers and every
component of the control plane listens, all inside a namespace that lives as long as its holder
process; mounts made there (container root filesystems, volumes) go with it. Ports the test process
itself talks to (the API server, etcd, the image registry) are forwarded from the host's 127.0.0.1
into the namespace. Needs root and iproute2.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import socket
import sys
from pathlib import Path

from .processes import Process, die_with_parent
from .waiting import polls

_CLONE_NEWNS = 0x00020000
_CLONE_NEWNET = 0x40000000
# The node's own address inside the namespace: the kubelet and the API server's endpoint live there
# (a node address cannot be a loopback one).
NODE_IP = "10.241.0.2"
NETNS_DIR = "/run/netns"  # where `ip netns` and containerd pin network namespaces (/var/run is /run)
# Host paths the node's programs use whatever their configuration says: the kubelet's device-plugin socket
# and links to container logs, the CNI plugins' address leases and result cache, and the runc state and
# shim sockets of containerd's runc shim. Two real nodes of two clusters (two test processes) would race for
# the one socket, and a cluster torn down with its pods still running would keep its pods' addresses leased for
# good, until no pod of any later cluster could get one. The real nodes of one cluster share them: each names
# its CNI network apart, and the second kubelet takes the device-plugin socket over, which no device plugin uses.
FIXED_DIRS = ("/var/lib/kubelet/device-plugins", "/var/log/containers", "/var/lib/cni", "/run/containerd")
# Each gets an empty directory of the cluster's own, so that no entry outlives it on the host.
PRIVATE_DIRS = (NETNS_DIR, *FIXED_DIRS)
_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def make_mount_points() -> None:
    """Make the host directories each cluster mounts its own over (``PRIVATE_DIRS``), if missing. They stay on the host,
    empty, for every later cluster: made by a cluster as it started, they would appear on the host while it runs (the
    first cluster on a fresh machine did that under the teardown test's eyes)."""
    for directory in PRIVATE_DIRS:
        Path(directory).mkdir(parents=True, exist_ok=True)


def _unshare_network_and_mounts() -> None:
    """Runs in the holder before exec: new network and mount namespaces."""
    _check(_libc.unshare(_CLONE_NEWNET | _CLONE_NEWNS), "unshare(net, mount)")
    die_with_parent()


class PodNetwork:
    """The namespace holder process, the forwarders into it, and how to start a process inside it."""

    def __init__(self, log_dir: Path, *, service_cidr: str, kwok_pod_cidr: str) -> None:
        self.log_dir = log_dir
        self._forwarders: list[Process] = []
        # Processes here resolve cluster names (OLM dials its catalog Service by name) through the
        # cluster DNS the real node serves; the host's /etc/resolv.conf is untouched.
        make_mount_points()
        resolv_conf = log_dir.parent / "resolv.conf"
        resolv_conf.write_text(f"nameserver {NODE_IP}\nsearch cluster.local\noptions ndots:5\n")
        script = (
            # Private propagation first: without it the host would see every container mount.
            f"mount --make-rprivate /; mount --bind {resolv_conf} /etc/resolv.conf; "
            f"for dir in {' '.join(PRIVATE_DIRS)}; do mount -t tmpfs -o mode=0755 nmo-node $dir; done; "
            f"ip link set lo up; ip addr add {NODE_IP}/32 dev lo; echo 1 > /proc/sys/net/ipv4/ip_forward; "
            # A route for Service IPs, as a node's default route gives them: kube-proxy's rules
            # rewrite them to pod addresses once the packet is routed at all.
            f"ip route add {service_cidr} dev lo; "
            # Simulated pods' addresses answer locally, so nothing sent to them leaves the namespace.
            f"ip route add local {kwok_pod_cidr} dev lo; "
        )
        self._holder = Process("pod-network", ["sh", "-ec", script + "echo ready; exec sleep infinity"], log_dir,
                               setup=_unshare_network_and_mounts)
        self._wait_ready()
        self._namespaces = [(os.open(f"/proc/{self._holder.pid}/ns/{name}", os.O_RDONLY | os.O_CLOEXEC), flag)
                            for name, flag in (("net", _CLONE_NEWNET), ("mnt", _CLONE_NEWNS))]

    def _wait_ready(self) -> None:
        for _ in polls(10, itertools.repeat(0.05)):
            if "ready" in self._holder.log_path.read_text(errors="replace"):
                return
            if not self._holder.alive():
                break
        raise RuntimeError(
            "cannot set up the cluster's network namespace (needs root and iproute2's `ip`):\n" + self._holder.log_tail()
        )

    def enter(self) -> None:
        """Runs in a child before exec: join the network and mount namespaces."""
        for fd, flag in self._namespaces:
            _check(_libc.setns(fd, flag), f"setns({flag:#x})")
        die_with_parent()

    def forward(self, port: int, host_port: int) -> None:
        """Make 127.0.0.1:``host_port`` on the host reach 127.0.0.1:``port`` inside the namespace."""
        listener = socket.create_server(("127.0.0.1", host_port), backlog=128)
        try:
            self._forwarders.append(
                Process(
                    f"forward-{host_port}-{port}",
                    [sys.executable, "-m", "devcluster.forward", str(listener.fileno()), str(port)],
                    self.log_dir,
                    env={"PYTHONPATH": str(Path(__file__).resolve().parents[1])},
                    setup=self.enter,
                    pass_fds=(listener.fileno(),),
                )
            )
        finally:
            listener.close()  # the forwarder holds its own copy

    def pids(self) -> list[int]:
        return [self._holder.pid, *(p.pid for p in self._forwarders)]

    def stop(self) -> None:
        for process in (*self._forwarders, self._holder):
            process.stop()
        for fd, _ in self._namespaces:
            os.close(fd)
