"""A real-node cluster leaves nothing behind on the host: no process, mount, network namespace (nor its
pinned entry), bridge, iptables rule or cgroup, whether it ends with Ctrl-C, with SIGTERM or with a failure
inside its `with` block."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from devcluster import toolchain
from devcluster.podnetwork import NETNS_DIR
from devcluster.realnode import CGROUPS, NAME as REAL_NODE, PAUSE_TAG

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "hack")}


def _host_state() -> dict[str, object]:
    """What a leaked node would leave on the host, read from the kernel."""
    namespaces = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                namespaces.add(os.readlink(proc / "ns" / "net"))
            except OSError:
                continue
    return {
        "mounts": sorted(line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()),
        "network namespaces": len(namespaces),
        "links": subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout.count("\n"),
        "iptables rules": subprocess.run(["iptables-save"], capture_output=True, text=True).stdout.count("\n-A "),
        "node cgroups": sorted(str(p) for h in CGROUPS.iterdir() for p in h.glob("nmo-node-*")),
        "pinned network namespaces": sorted(os.listdir(NETNS_DIR)) if os.path.isdir(NETNS_DIR) else [],
    }


def _wait_settled(before: dict[str, object], timeout: float = 30) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while (after := _host_state()) != before and time.monotonic() < deadline:
        time.sleep(0.5)
    return after


def _processes(marker: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if marker in line]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_stopping_by_signal_leaves_nothing_behind(signum: int) -> None:
    """Ctrl-C, and SIGTERM (what a CI runner's timeout sends), with a pod running on the real node."""
    before = _host_state()
    proc = subprocess.Popen([sys.executable, "-m", "devcluster", "up", "--real-node", "--nodes", "1"], cwd=ROOT, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
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
    assert _host_state()["node cgroups"], "the running node made no cgroup"
    proc.send_signal(signum)
    assert proc.wait(120) == 0
    assert _wait_settled(before) == before
    assert _processes(str(workdir)) == [] and not workdir.exists()


@pytest.mark.parametrize("ending", ["exception", "sigterm"])
def test_a_program_ending_inside_the_cluster_block_leaves_nothing_behind(ending: str) -> None:
    """A test that fails, and a test run that SIGTERM ends (a CI runner's timeout), inside `with Cluster(...)`."""
    before = _host_state()
    script = (
        "import time\n"
        "from devcluster.cluster import Cluster\n"
        "with Cluster(real_node=True) as cluster:\n"
        "    print(cluster.workdir, flush=True)\n"
        + ("    raise RuntimeError('a test failed')\n" if ending == "exception" else "    time.sleep(600)\n")
    )
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    workdir = proc.stdout.readline().strip()
    if ending == "sigterm":
        proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=300)
    if ending == "exception":
        assert proc.returncode != 0 and "a test failed" in stderr
    else:
        # Taken as Ctrl-C: Python ends an uncaught KeyboardInterrupt by SIGINT.
        assert proc.returncode == -signal.SIGINT, stderr
    assert _wait_settled(before) == before
    assert _processes(workdir) == [] and not Path(workdir).exists()
