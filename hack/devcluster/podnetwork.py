"""A network namespace of the cluster's own, in which simulated pod IPs are real local addresses.

A Service reaches its pods through their Endpoints, and the API refuses loopback addresses there. So
when the API server must call a webhook Service backed by a KWOK pod (OLM wires conversion webhooks
that way), the pod's IP has to be an address a local process can listen on. Every component then runs
inside a private network namespace (entered through a user namespace, so no privilege is needed) where
KWOK's whole pod range is routed to the loopback device: a process listening on 0.0.0.0 there answers
at every simulated pod IP. The host's network is never touched. Ports the test process itself talks to
(the API server, etcd, an operator's probes) are forwarded from the host's 127.0.0.1 into the namespace.
"""

from __future__ import annotations

import ctypes
import os
import socket
import sys
import time
from pathlib import Path

from .processes import Process, die_with_parent

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
# With a real node, the node's own address inside the namespace: the kubelet and the API server's
# endpoint live there (a node address cannot be a loopback one).
NODE_IP = "10.241.0.2"
_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _unshare_as_root_of_own_namespace() -> None:
    """Runs in the holder before exec: a new user namespace mapping us to root, and a new network namespace."""
    uid, gid = os.getuid(), os.getgid()
    _check(_libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET), "unshare(user, net)")
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
    Path("/proc/self/gid_map").write_text(f"0 {gid} 1")
    die_with_parent()  # after the credential change, which clears a parent-death signal set before it


def _unshare_network_and_mounts() -> None:
    """Runs in the holder before exec (as real root): new network and mount namespaces.

    Mounts a kubelet and containerd make then live in a namespace that ends with its last process,
    so nothing stays mounted on the host after a teardown, however it ends.
    """
    _check(_libc.unshare(_CLONE_NEWNET | _CLONE_NEWNS), "unshare(net, mount)")
    die_with_parent()


class PodNetwork:
    """The namespace holder process, the forwarders into it, and how to start a process inside it.

    ``privileged`` (for a real node, which needs real root for cgroups and mounts) makes network and
    mount namespaces owned by root instead of a user namespace, with the node's address on loopback.
    """

    def __init__(self, pod_cidr: str, log_dir: Path, *, privileged: bool = False, service_cidr: str = "") -> None:
        self.log_dir = log_dir
        self._forwarders: list[Process] = []
        script = f"ip link set lo up; ip route add local {pod_cidr} dev lo; "
        if privileged:
            # Processes here resolve cluster names (OLM dials its catalog Service by name) through the
            # cluster DNS the real node serves; the host's /etc/resolv.conf is untouched.
            resolv_conf = log_dir.parent / "resolv.conf"
            resolv_conf.write_text(f"nameserver {NODE_IP}\nsearch cluster.local\noptions ndots:5\n")
            # Private propagation first: without it the host would see every container mount.
            script += (f"mount --make-rprivate /; mount --bind {resolv_conf} /etc/resolv.conf; "
                       f"ip addr add {NODE_IP}/32 dev lo; echo 1 > /proc/sys/net/ipv4/ip_forward; "
                       # A route for Service IPs, as a node's default route gives them: kube-proxy's
                       # rules rewrite them to pod addresses once the packet is routed at all.
                       f"ip route add {service_cidr} dev lo; ")
        self._holder = Process(
            "pod-network",
            ["sh", "-ec", script + "echo ready; exec sleep infinity"],
            log_dir,
            setup=_unshare_network_and_mounts if privileged else _unshare_as_root_of_own_namespace,
        )
        self._wait_ready()
        self._namespaces = [
            (os.open(f"/proc/{self._holder.pid}/ns/{name}", os.O_RDONLY | os.O_CLOEXEC), flag)
            for name, flag in ((("net", _CLONE_NEWNET), ("mnt", _CLONE_NEWNS)) if privileged else (("user", _CLONE_NEWUSER), ("net", _CLONE_NEWNET)))
        ]

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 10
        while "ready" not in self._holder.log_path.read_text(errors="replace"):
            if not self._holder.alive() or time.monotonic() > deadline:
                raise RuntimeError(
                    "cannot set up the pod network namespace (needs unprivileged user namespaces and iproute2's `ip`):\n"
                    + self._holder.log_tail()
                )
            time.sleep(0.05)

    def enter(self) -> None:
        """Runs in a child before exec: join the namespaces (a user namespace first: it grants the right to join the network)."""
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
