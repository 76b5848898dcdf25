"""A real-node cluster leaves nothing behind on the host: no process, mount, network namespace (nor its
pinned entry), bridge, iptables rule, cgroup, or file in the host's directories for node state (address
leases, runtime state, certificates), whether it ends with Ctrl-C, with SIGTERM or with a failure
inside its `with` block.

Other clusters may run meanwhile (tests in other processes): what is checked is the host's own state
and what the cluster under test made, its cgroups and network namespaces, never other clusters'."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster import toolchain
from devcluster.podnetwork import make_mount_points
from devcluster.realnode import CGROUP_PREFIX, CGROUPS, PAUSE_TAG
from devcluster.realnode import NAME as REAL_NODE

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "hack")}
# Where a node's programs write on the host unless told otherwise: pinned network namespaces, the kubelet's
# files (device-plugin socket, serving certificate), links to container logs, the CNI plugins' address
# leases and result cache, and the runc shim's state and sockets.
HOST_DIRS = ("/run/netns", "/var/lib/kubelet", "/var/log/pods", "/var/log/containers", "/var/lib/cni", "/run/containerd")


def _cgroups(owner: int) -> list[Path]:
    """The real node's cgroups of the cluster that process ``owner`` runs."""
    return sorted(p for h in CGROUPS.iterdir() for p in h.glob(f"{CGROUP_PREFIX}{owner}-*"))


def _host_state(owner: int) -> dict[str, object]:
    """What a leaked node of the cluster run by ``owner`` would leave on the host, read from the kernel. The empty
    directories every cluster mounts its own over are the harness's, made once and kept: made first, so that the
    first cluster on a fresh machine is judged like any other."""
    make_mount_points()
    return {
        "mounts": sorted(line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()),
        "links": subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout.count("\n"),
        "iptables rules": subprocess.run(["iptables-save"], capture_output=True, text=True).stdout.count("\n-A "),
        "node cgroups": [str(p) for p in _cgroups(owner)],
        **{directory: sorted(map(str, Path(directory).rglob("*"))) for directory in HOST_DIRS},
    }


def _net_namespace(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


@contextlib.contextmanager
def _pinned_namespaces(owner: int, workdir: str) -> Iterator[set[str]]:
    """The network namespaces the running cluster made (its own, where its processes run, and its pods'), held
    open until the block ends. The kernel gives a freed namespace's number to the next one made: unheld, a
    namespace of another cluster, made after this one's went, would pass for one this cluster left behind."""
    pids = {line.split(None, 1)[0] for line in _processes(workdir, with_pid=True)}
    for cgroup in _cgroups(owner):
        pids |= {pid for procs in cgroup.rglob("cgroup.procs") for pid in procs.read_text().split()}
    held: list[int] = []
    try:
        for pid in pids:
            with contextlib.suppress(OSError):  # a process that ended meanwhile
                process = os.open(f"/proc/{pid}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    namespace = os.open("ns/net", os.O_RDONLY | os.O_CLOEXEC, dir_fd=process)
                    # Still the cluster's process: a pid that ended since it was listed may have gone to another one.
                    if _of_cluster(process, owner, workdir):
                        held.append(namespace)
                    else:
                        os.close(namespace)
                finally:
                    os.close(process)
        yield {f"net:[{os.fstat(fd).st_ino}]" for fd in held} - {_net_namespace("self")}
    finally:
        for fd in held:
            os.close(fd)


def _of_cluster(process: int, owner: int, workdir: str) -> bool:
    """Whether the process of the /proc directory ``process`` runs from the cluster's work directory or in its cgroups."""

    def read(name: str) -> str:
        with os.fdopen(os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=process), "rb") as file:
            return file.read().decode(errors="replace")

    return workdir in read("cmdline") or f"{CGROUP_PREFIX}{owner}-" in read("cgroup")


def _command_line(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "(ended)"


def _left_in(namespaces: set[str], timeout: float = 30) -> list[str]:
    """Processes still in any of ``namespaces`` once they have had ``timeout`` seconds to end, with their command lines."""
    deadline = time.monotonic() + timeout
    while True:
        left = [f"{proc.name}: {_command_line(proc)}"
                for proc in Path("/proc").iterdir() if proc.name.isdigit() and _net_namespace(proc.name) in namespaces]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.5)


def _settled(owner: int, before: dict[str, object], timeout: float = 30) -> dict[str, object]:
    """The host's state once it is back to ``before``, or as it is after ``timeout`` seconds (namespaces go asynchronously)."""
    deadline = time.monotonic() + timeout
    while (after := _host_state(owner)) != before and time.monotonic() < deadline:
        time.sleep(0.5)
    return after


def _processes(marker: str, with_pid: bool = False) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid=,args=" if with_pid else "args="], capture_output=True, text=True).stdout
    return [line.strip() for line in out.splitlines() if marker in line and "ps -eo" not in line]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_stopping_by_signal_leaves_nothing_behind(signum: int) -> None:
    """Ctrl-C, and SIGTERM (what a CI runner's timeout sends), with a pod running on the real node."""
    proc = subprocess.Popen([sys.executable, "-m", "devcluster", "up", "--real-node", "--nodes", "1"], cwd=ROOT, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    before = _host_state(proc.pid)
    assert proc.stdout is not None
    registry = kubeconfig = None
    for line in proc.stdout:
        if match := re.search(r"image registry \(plain HTTP\) at ([0-9.]+:[0-9]+)", line):
            registry = match.group(1)
        if match := re.search(r"export KUBECONFIG=(\S+)", line):
            kubeconfig = Path(match.group(1))
            break
    else:
        raise AssertionError(f"the cluster exited early with {proc.wait()}")
    workdir = kubeconfig.parent
    kubectl = [str(toolchain.ensure(["kubectl"])["kubectl"]), f"--kubeconfig={kubeconfig}"]
    sandbox = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sandbox"},
               "spec": {"nodeName": REAL_NODE, "containers": [{"name": "pause", "image": f"{registry}/{PAUSE_TAG}"}]}}
    subprocess.run([*kubectl, "apply", "-f", "-"], input=json.dumps(sandbox), check=True, capture_output=True, text=True)
    ready = subprocess.run([*kubectl, "wait", "--for=condition=Ready", "pod/sandbox", "--timeout=180s"], capture_output=True, text=True)
    if ready.returncode != 0:
        described = subprocess.run([*kubectl, "describe", "pod", "sandbox"], capture_output=True, text=True).stdout
        proc.send_signal(signal.SIGINT)
        proc.wait(120)
        raise AssertionError(f"the pod did not become Ready on the real node:\n{ready.stderr}\n{described}")
    assert _processes(str(workdir)), "no process of the running cluster found"
    assert _cgroups(proc.pid), "the running node made no cgroup"
    with _pinned_namespaces(proc.pid, str(workdir)) as namespaces:
        assert len(namespaces) >= 2, "the cluster's network namespace and its pod's not found"
        proc.send_signal(signum)
        assert proc.wait(120) == 0
        assert _left_in(namespaces) == []
    assert _settled(proc.pid, before) == before
    assert _processes(str(workdir)) == [] and not workdir.exists()


@pytest.mark.parametrize("ending", ["exception", "sigterm"])
def test_a_program_ending_inside_the_cluster_block_leaves_nothing_behind(ending: str) -> None:
    """A test that fails, and a test run that SIGTERM ends (a CI runner's timeout), inside `with Cluster(...)`."""
    script = (
        "import sys\n"
        "from devcluster.cluster import Cluster\n"
        "with Cluster(real_node=True) as cluster:\n"
        "    print(cluster.workdir, flush=True)\n"
        "    sys.stdin.readline()\n"
        + ("    raise RuntimeError('a test failed')\n" if ending == "exception" else "    sys.stdin.readline()\n")
    )
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    before = _host_state(proc.pid)
    assert proc.stdout is not None and proc.stdin is not None
    workdir = proc.stdout.readline().strip()
    with _pinned_namespaces(proc.pid, workdir) as namespaces:
        assert namespaces, "the cluster's network namespace not found"
        if ending == "sigterm":
            proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate("\n", timeout=300)
        if ending == "exception":
            assert proc.returncode != 0 and "a test failed" in stderr
        else:
            # Taken as Ctrl-C: Python ends an uncaught KeyboardInterrupt by SIGINT.
            assert proc.returncode == -signal.SIGINT, stderr
        assert _left_in(namespaces) == []
    assert _settled(proc.pid, before) == before
    assert _processes(workdir) == [] and not Path(workdir).exists()
