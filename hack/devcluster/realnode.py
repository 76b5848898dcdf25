"""A real node next to the KWOK ones: a kubelet with containerd, runc and the CNI bridge, and kube-proxy.

Everything runs inside the cluster's privileged network and mount namespace (``podnetwork``): the
node has an address of its own there, pods get addresses on a bridge, kube-proxy's rules and every
mount live and die with the namespace. Containers run in a cgroup subtree of the node's own, which
teardown empties and removes, so nothing of the node survives it. The kubelet and kube-proxy come
from the pinned Kubernetes module, containerd, runc and the CNI plugins from Debian's packages, and
the pause image is built here from the Kubernetes module's own ``pause.c``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Protocol

import yaml

from . import toolchain
from .podnetwork import NODE_IP, PodNetwork
from .processes import Process, free_port
from .waiting import polls, wait_for

NAME = "node-real"  # the first real node; a further one is NAME-2, NAME-3, ...
# Each real node's pods get a /24 of this range on a bridge of their own, in the one network namespace.
POD_CIDRS = "10.245.0.0/16"
CLUSTER_DOMAIN = "cluster.local"
CGROUPS = Path("/sys/fs/cgroup")
CGROUP_PREFIX = "nmo-node-"  # then the owning process's pid: a cgroup whose owner is gone is an orphan
CNI_BIN = Path("/usr/lib/cni")
PAUSE_TAG = "pause:3.10"
PAUSE_CONTAINERFILE = 'FROM scratch\nCOPY rootfs/ /\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n'


class NodeHost(Protocol):
    """What a real node needs from the control plane that hosts it (``cluster.Cluster`` is one)."""

    @property
    def workdir(self) -> Path: ...
    @property
    def logs_dir(self) -> Path: ...
    @property
    def kubeconfig(self) -> Path: ...
    @property
    def network(self) -> PodNetwork | None: ...
    def node_token(self, name: str) -> str: ...
    @property
    def kube_proxy_token(self) -> str: ...
    def node_ready(self, name: str) -> bool: ...
    def write_kubeconfig(self, path: Path, user: str, token: str) -> None: ...
    def spawn(self, name: str, argv: list[str], *, env: dict[str, str] | None = None, log_dir: Path | None = None) -> Process: ...


def node_name(index: int) -> str:
    """The name of the cluster's ``index``-th real node (from 0)."""
    return NAME if index == 0 else f"{NAME}-{index + 1}"


def node_ip(index: int) -> str:
    """The ``index``-th real node's address in the cluster's namespace: the first is the namespace's own ``NODE_IP``."""
    first = ipaddress.ip_address(NODE_IP)
    return str(first + index)


class RealNode:
    """Start with ``start()`` once the control plane answers; ``stop()`` leaves nothing behind.

    Several real nodes share the cluster's network namespace, each with its own address, bridge, pod range,
    containerd and cgroups; the first also serves what the namespace needs once (cluster DNS, kube-proxy's
    rules), so Services and names work from every node's pods alike."""

    def __init__(self, cluster: NodeHost, registry_host: str, index: int = 0) -> None:
        self.cluster = cluster
        self.registry_host = registry_host
        self.index = index
        self.name = node_name(index)
        self.ip = node_ip(index)
        self.pod_cidr = str(list(ipaddress.ip_network(POD_CIDRS).subnets(new_prefix=24))[index])
        self.dir = cluster.workdir / ("node" if index == 0 else f"node-{index + 1}")
        self.cgroup = f"{CGROUP_PREFIX}{os.getpid()}-{cluster.workdir.name.rsplit('-', 1)[-1]}{'' if index == 0 else f'-{index + 1}'}"
        # A further node's processes log apart from the first's, which log beside the control plane.
        self.logs_dir = cluster.logs_dir if index == 0 else cluster.logs_dir / self.name
        self.processes: list[Process] = []
        self.ready_seconds = 0.0

    @property
    def socket(self) -> Path:
        return self.dir / "containerd.sock"

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> None:
        started = time.monotonic()
        if os.geteuid() != 0:
            raise RuntimeError("a real node needs root (cgroups, mounts and network interfaces for containers)")
        for tool in ("containerd", "runc"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"{tool} is not installed: run `make system-deps` (Debian packages containerd, runc, containernetworking-plugins)")
        binaries = toolchain.ensure(["kubelet", "kube-proxy", "coredns"])
        self.dir.mkdir(parents=True)
        self.logs_dir.mkdir(exist_ok=True)
        if self.index == 0:
            self._remove_orphans()
        else:
            self._add_address()
        self._make_cgroups()
        self._start_containerd()
        if self.index == 0:
            self._push_pause_image()
            self._start_dns(binaries["coredns"])
        self._start_kubelet(binaries["kubelet"])
        if self.index == 0:
            self._start_kube_proxy(binaries["kube-proxy"])
        kubelet = next(p for p in self.processes if p.name == "kubelet")
        wait_for(f"node {self.name} Ready", lambda: self.cluster.node_ready(self.name), 60, kubelet)
        self.ready_seconds = time.monotonic() - started

    def stop(self) -> None:
        """Stop the kubelet, kill every container and shim, then containerd, and remove the cgroups."""
        kubelet = [p for p in self.processes if p.name == "kubelet"]
        for process in kubelet:
            process.stop()
        self._kill_cgroup_members()
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()
        self._kill_cgroup_members()
        self._remove_cgroups()

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def _add_address(self) -> None:
        """A further node's address, beside the first's on the namespace's loopback."""
        network = self.cluster.network
        assert network is not None, "a real node runs in the cluster's network namespace"
        subprocess.run(["ip", "addr", "add", f"{self.ip}/32", "dev", "lo"], preexec_fn=network.enter, check=True, capture_output=True)

    # ----------------------------------------------------------------- cgroups
    def _hierarchies(self) -> list[Path]:
        """Every mounted cgroup hierarchy (v1 controllers, the named systemd one, and v2 if unified)."""
        return [path for path in sorted(CGROUPS.iterdir()) if path.is_dir() and not path.is_symlink()] or [CGROUPS]

    def _make_cgroups(self) -> None:
        for hierarchy in self._hierarchies():
            parent = hierarchy
            for part in (self.cgroup, "runtime"):
                child = parent / part
                child.mkdir(exist_ok=True)
                # A v1 cpuset cgroup takes no process until it is given CPUs and memory nodes.
                for setting in ("cpuset.cpus", "cpuset.mems"):
                    if (child / setting).exists() and not (child / setting).read_text().strip():
                        (child / setting).write_text((parent / setting).read_text())
                parent = child

    def _join_runtime_cgroup(self) -> None:
        """Runs in containerd before exec: its shims inherit the cgroup, so teardown can find them."""
        for hierarchy in self._hierarchies():
            (hierarchy / self.cgroup / "runtime" / "cgroup.procs").write_text("0")

    def _members(self, cgroup: str) -> set[int]:
        pids: set[int] = set()
        for hierarchy in self._hierarchies():
            # os.walk, not Path.rglob: a pod's cgroup removed by its shim mid-walk is skipped, where rglob raises.
            for directory, _, files in os.walk(hierarchy / cgroup):
                if "cgroup.procs" not in files:
                    continue
                try:
                    pids.update(int(line) for line in (Path(directory) / "cgroup.procs").read_text().split())
                except OSError:
                    continue
        return pids

    def _kill_cgroup_members(self, cgroup: str | None = None) -> None:
        """SIGKILL every process in the cgroup until none is left (a shim may start one meanwhile), for 20 s
        at most: what survives that shows in the removal of the cgroups."""
        cgroup = cgroup or self.cgroup
        for _ in polls(20, itertools.repeat(0.1)):
            if not (members := self._members(cgroup)):
                return
            for pid in members:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def _remove_cgroups(self, cgroup: str | None = None) -> None:
        for hierarchy in self._hierarchies():
            top = hierarchy / (cgroup or self.cgroup)
            if not top.exists():
                continue
            for directory, _, _ in os.walk(top, topdown=False):  # the deepest first, top last; one gone meanwhile is skipped
                _rmdir(Path(directory))

    def _remove_orphans(self) -> None:
        """A node whose owner was SIGKILLed had no teardown: its containers and cgroups go now."""
        for orphan in {path.name for h in self._hierarchies() for path in h.glob(f"{CGROUP_PREFIX}*")}:
            owner = int(orphan[len(CGROUP_PREFIX):].split("-", 1)[0])
            if not Path(f"/proc/{owner}").exists():
                self._kill_cgroup_members(orphan)
                self._remove_cgroups(orphan)

    # ----------------------------------------------------------------- containerd
    def _start_containerd(self) -> None:
        certs = self.dir / "certs.d" / self.registry_host
        certs.mkdir(parents=True)
        # The local registry speaks plain HTTP on the namespace's loopback.
        (certs / "hosts.toml").write_text(f'server = "http://{self.registry_host}"\n\n[host."http://{self.registry_host}"]\n  capabilities = ["pull", "resolve"]\n')
        cni = self.dir / "cni"
        cni.mkdir()
        (cni / "10-bridge.conflist").write_text(json.dumps({
            "cniVersion": "1.0.0",
            "name": f"nmo-pods-{self.index}",
            "plugins": [
                {"type": "bridge", "bridge": f"cni{self.index}", "isGateway": True, "hairpinMode": True,
                 "ipam": {"type": "host-local", "ranges": [[{"subnet": self.pod_cidr}]], "routes": [{"dst": "0.0.0.0/0"}]}},
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }))
        config = self.dir / "containerd.toml"
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        config.write_text(f"""version = 2
root = "{self.dir / 'containerd-root'}"
state = "{self.dir / 'containerd-state'}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "{self.socket}"

[ttrpc]
  address = "{self.dir / 'containerd.sock.ttrpc'}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{self.dir / 'containerd-opt'}"

[{cri}]
  sandbox_image = "{self.registry_host}/{PAUSE_TAG}"
  # Writing a negative oom_score_adj is denied on this kind of machine.
  restrict_oom_score_adj = true
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        BinaryName = "{shutil.which('runc')}"
        SystemdCgroup = false
  [{cri}.cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{cni}"
  [{cri}.registry]
    config_path = "{self.dir / 'certs.d'}"
""")
        enter = self.cluster.network.enter if self.cluster.network else None

        def setup() -> None:
            if enter:
                enter()
            self._join_runtime_cgroup()

        process = Process("containerd", [shutil.which("containerd") or "containerd", "--config", str(config), "--log-level", "warn"],
                          self.logs_dir, setup=setup)
        self.processes.append(process)
        wait_for("containerd's socket", self.socket.exists, 30, process)

    def _push_pause_image(self) -> None:
        """The sandbox image: upstream's pause.c from the pinned Kubernetes module, compiled statically."""
        from node_maintenance_packaging.imagetool import Builder, pick

        source = toolchain.module_source("kubernetes", "k8s.io/kubernetes") / "build" / "pause" / "linux" / "pause.c"
        context = Path(tempfile.mkdtemp(prefix="nmo-pause-", dir=self.dir))
        (context / "rootfs").mkdir()
        subprocess.run(["cc", "-Os", "-static", "-DVERSION=v3.10-nmo", "-o", str(context / "rootfs" / "pause"), str(source)],
                       check=True, capture_output=True)
        (context / "Containerfile").write_text(PAUSE_CONTAINERFILE)
        builder = Builder(pick("umoci"), tls_verify=False)
        try:
            builder.build_and_push(context, context / "Containerfile", f"{self.registry_host}/{PAUSE_TAG}")
        finally:
            builder.close()
            shutil.rmtree(context, ignore_errors=True)

    # ----------------------------------------------------------------- kubelet and kube-proxy
    def _start_dns(self, coredns: Path) -> None:
        """Cluster DNS on the node's address, so pods resolve kubernetes.default and Service names."""
        corefile = self.dir / "Corefile"
        corefile.write_text(f"""{CLUSTER_DOMAIN}:53 in-addr.arpa:53 {{
    bind {NODE_IP}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa {{
        kubeconfig {self.cluster.kubeconfig}
        pods insecure
    }}
    cache 5
    errors
}}
""")
        self._spawn("coredns", [str(coredns), "-conf", str(corefile)])

    def _start_kubelet(self, kubelet: Path) -> None:
        kubeconfig = self.dir / "kubelet.kubeconfig"
        self.cluster.write_kubeconfig(kubeconfig, f"system:node:{self.name}", self.cluster.node_token(self.name))
        config = self.dir / "kubelet.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": f"/{self.cgroup}",
            "failCgroupV1": False,  # this kind of machine mounts cgroups v1 and v2 side by side
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "address": self.ip,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": free_port(),
            # The node's API is reachable only inside the cluster's namespace; the API server reads logs through it.
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "clusterDNS": [NODE_IP],
            "clusterDomain": CLUSTER_DOMAIN,
            "failSwapOn": False,
            "serializeImagePulls": False,
            "podLogsDir": str(self.dir / "pod-logs"),
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "podPidsLimit": -1,
        }))
        self._spawn("kubelet", [
            str(kubelet),
            f"--config={config}",
            f"--kubeconfig={kubeconfig}",
            f"--root-dir={self.dir / 'kubelet'}",
            f"--cert-dir={self.dir / 'kubelet' / 'pki'}",  # its default is on the host, shared by every node
            f"--hostname-override={self.name}",
            f"--node-ip={self.ip}",
            "--node-labels=type=real",
            "--v=1",
        ])

    def _start_kube_proxy(self, kube_proxy: Path) -> None:
        kubeconfig = self.dir / "kube-proxy.kubeconfig"
        self.cluster.write_kubeconfig(kubeconfig, "system:kube-proxy", self.cluster.kube_proxy_token)
        config = self.dir / "kube-proxy.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "mode": "iptables",
            "hostnameOverride": NAME,
            "clusterCIDR": POD_CIDRS,
            "bindAddress": NODE_IP,
            "nodePortAddresses": ["primary"],
            "healthzBindAddress": f"127.0.0.1:{free_port()}",
            "metricsBindAddress": f"127.0.0.1:{free_port()}",
            # Node-wide conntrack sysctls are not the namespace's to change.
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
            # Pod-to-Service traffic that lands on a pod of the same bridge needs its reply to come back
            # through the node, which masquerading guarantees without br_netfilter.
            "iptables": {"masqueradeAll": True},
        }))
        self._spawn("kube-proxy", [str(kube_proxy), f"--config={config}", "--v=1"])

    def _spawn(self, name: str, argv: list[str]) -> None:
        self.processes.append(self.cluster.spawn(name, argv, log_dir=self.logs_dir))


def _rmdir(directory: Path) -> None:
    try:
        directory.rmdir()
    except FileNotFoundError:
        pass
