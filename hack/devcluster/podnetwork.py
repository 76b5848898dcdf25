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

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
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


class PodNetwork:
    """The namespace holder process, the forwarders into it, and how to start a process inside it."""

    def __init__(self, pod_cidr: str, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._forwarders: list[Process] = []
        self._holder = Process(
            "pod-network",
            ["sh", "-ec", f'ip link set lo up; ip route add local {pod_cidr} dev lo; echo ready; exec sleep infinity'],
            log_dir,
            setup=_unshare_as_root_of_own_namespace,
        )
        self._wait_ready()
        self._user_ns = os.open(f"/proc/{self._holder.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        self._net_ns = os.open(f"/proc/{self._holder.pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)

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
        """Runs in a child before exec: join the namespace (user first: it grants the right to join the network)."""
        _check(_libc.setns(self._user_ns, _CLONE_NEWUSER), "setns(user)")
        _check(_libc.setns(self._net_ns, _CLONE_NEWNET), "setns(net)")
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
        for fd in (self._user_ns, self._net_ns):
            os.close(fd)
