"""A real-node cluster leaves nothing behind on the host: no process, mount, network namespace, bridge,
iptables rule or cgroup, whether it ends with Ctrl-C or with a failure inside its `with` block."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from devcluster.realnode import CGROUPS

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
    }


def _wait_settled(before: dict[str, object], timeout: float = 30) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while (after := _host_state()) != before and time.monotonic() < deadline:
        time.sleep(0.5)
    return after


def _processes(marker: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if marker in line]


def test_ctrl_c_leaves_nothing_behind() -> None:
    before = _host_state()
    proc = subprocess.Popen([sys.executable, "-m", "devcluster", "up", "--real-node", "--nodes", "1"], cwd=ROOT, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    workdir = None
    for line in proc.stdout:
        if match := re.search(r"export KUBECONFIG=(\S+)", line):
            workdir = Path(match.group(1)).parent
            break
    else:
        raise AssertionError(f"the cluster exited early with {proc.wait()}")
    assert _processes(str(workdir)), "no process of the running cluster found"
    assert _host_state()["node cgroups"], "the running node made no cgroup"
    proc.send_signal(signal.SIGINT)
    assert proc.wait(120) == 0
    assert _wait_settled(before) == before
    assert _processes(str(workdir)) == [] and not workdir.exists()


def test_a_failure_inside_the_cluster_block_leaves_nothing_behind() -> None:
    before = _host_state()
    script = (
        "from devcluster.cluster import Cluster\n"
        "with Cluster(real_node=True) as cluster:\n"
        "    print(cluster.workdir, flush=True)\n"
        "    raise RuntimeError('a test failed')\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0 and "a test failed" in result.stderr
    workdir = result.stdout.strip().splitlines()[-1]
    assert _wait_settled(before) == before
    assert _processes(workdir) == [] and not Path(workdir).exists()
