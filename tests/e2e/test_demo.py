"""`make demo` as a new user runs it, headless, with KEEP=1: the kept cluster answers through the
KUBECONFIG line it prints; stopped (SIGTERM, as Ctrl-C) it tears down and exits 0, and the transcript
it writes shows the node drained (the NodeMaintenance Succeeded, its pods evicted under their budgets)
and handed back (schedulable, the drain taint gone). The transcript goes to a temporary file: the
committed one stays as it is."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from demo import kubevirt, workload
from demo.__main__ import NODE_COLUMNS, TARGET
from devcluster import toolchain
from devcluster.realnode import NAME as REAL_NODE
from node_maintenance.drain.nodes import TAINT

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```text\n\$ (?P<command>[^\n]*)\n(?P<output>.*?)^```$", re.M | re.S)


def outputs(transcript: str, command: str, *, prefix: bool = False) -> list[str]:
    """What each run of ``command`` (or of a command starting so) printed, in order."""
    return [m["output"] for m in BLOCK.finditer(transcript)
            if m["command"] == command or (prefix and m["command"].startswith(command))]


def rows(table: str) -> list[dict[str, str]]:
    """A kubectl table whose cells hold no spaces, as dicts by column."""
    header, *lines = table.splitlines()
    return [dict(zip(header.split(), line.split(), strict=True)) for line in lines]


def descendants(pid: int) -> list[int]:
    children = {int(p.name): int(p.joinpath("stat").read_text().rsplit(")", 1)[1].split()[1])
                for p in Path("/proc").iterdir() if p.name.isdigit() and p.joinpath("stat").exists()}
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        kids = [child for child, ppid in children.items() if ppid == parent]
        found += kids
        frontier += kids
    return found


def the_demo(make_pid: int) -> int:
    """The demo's process under make (make may run it through a shell)."""
    (pid,) = [p for p in descendants(make_pid) if b"-m\0demo\0" in Path(f"/proc/{p}/cmdline").read_bytes()]
    return pid


def kubectl(kubeconfig: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(toolchain.binary("kubectl")), f"--kubeconfig={kubeconfig}", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.timeout(1500)
def test_make_demo_drains_a_node_hands_it_back_and_keeps_the_cluster_on_request(tmp_path: Path) -> None:
    transcript_file = tmp_path / "demo-transcript.md"
    with subprocess.Popen(["make", "-s", "demo", "KEEP=1", f"DEMO_TRANSCRIPT={transcript_file}"], cwd=ROOT, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"}) as make:
        assert make.stdout is not None
        shown: list[str] = []
        for line in make.stdout:
            shown.append(line)
            if line.startswith("export KUBECONFIG="):
                break
        # The demo says why it failed before its diagnostics, whose tail alone is shown: the reason is shown first.
        failed = "".join(line for line in shown if line.startswith("demo failed"))
        assert shown and shown[-1].startswith("export KUBECONFIG="), failed + "".join(shown)[-6000:] + f"\nexit code {make.wait()}"
        kubeconfig = shown[-1].split("=", 1)[1].strip()
        # The kept cluster answers, the node back in service, the maintenance gone.
        nodes = kubectl(kubeconfig, "get", "nodes", "-o", "name")
        assert {f"node/{TARGET}", f"node/{REAL_NODE}"} <= set(nodes.stdout.split()), nodes.stderr
        assert kubectl(kubeconfig, "get", "nm", "-o", "name").stdout == ""
        os.kill(the_demo(make.pid), signal.SIGTERM)
        shown.append(make.stdout.read())
        assert make.wait(timeout=300) == 0, "".join(shown)[-6000:]
    assert not Path(kubeconfig).exists(), "the cluster's directory is removed on teardown"
    transcript = transcript_file.read_text()
    assert "\x1b" not in transcript and str(ROOT) not in transcript and "/tmp/" not in transcript and "127.0.0.1" not in transcript
    assert "export KUBECONFIG=<cluster directory>/admin.kubeconfig" in transcript

    # The workload started on the node: the pods of every kind.
    on_node = f"kubectl get pods --all-namespaces --field-selector spec.nodeName={TARGET} -o custom-columns="
    before, after = outputs(transcript, on_node, prefix=True)
    owners = {(r["NAMESPACE"], r["POD"]): r["OWNER"] for r in rows(before)}
    assert {"ReplicaSet", "StatefulSet", "DaemonSet", "<none>"} <= set(owners.values())
    assert (kubevirt.NAMESPACE, kubevirt.SOURCE) in owners and (workload.APPS, workload.BARE) in owners

    # Drained: OLM's operator took the node, the budget of the VM held its pod until KubeVirt (mimicked) moved it.
    (listed,) = outputs(transcript, "kubectl get nm")
    (maintenance,) = rows(listed)
    assert (maintenance["NODE"], maintenance["PHASE"]) == (TARGET, "Succeeded")
    assert f"held back: {kubevirt.NAMESPACE}/{kubevirt.SOURCE} waits on PodDisruptionBudget {kubevirt.NAMESPACE}/{kubevirt.BUDGET}" in transcript
    node_views = outputs(transcript, f"kubectl get node {TARGET} -o custom-columns={NODE_COLUMNS}")
    assert len(node_views) == 2, node_views
    (drained,), (handed_back,) = rows(node_views[0]), rows(node_views[1])
    assert drained["UNSCHEDULABLE"] == "true" and TAINT["key"] in drained["TAINTS"].split(","), drained
    evicted = re.search(rf"{maintenance['NAME']} Succeeded after ~\d+ s: (\d+) pods evicted, 0 left", transcript)
    assert evicted and int(evicted[1]) == sum(owner != "DaemonSet" for owner in owners.values()), evicted
    left = {(r["NAMESPACE"], r["POD"]) for r in rows(after)}
    assert left == {pod for pod, owner in owners.items() if owner == "DaemonSet"}, "only the DaemonSet's pod stays"
    placed = rows(outputs(transcript, f"kubectl get pods -n {workload.APPS} -o custom-columns=POD:.metadata.name,NODE:.spec.nodeName,PHASE:.status.phase")[0])
    moved = [r for r in placed if not r["POD"].startswith(workload.DAEMON)]
    assert moved and all(r["NODE"] != TARGET and r["PHASE"] == "Running" for r in moved), placed
    assert workload.BARE not in {r["POD"] for r in placed}, "the bare pod is evicted for good (kubectl drain --force)"

    # Handed back: the NodeMaintenance deleted, the node schedulable, our taint gone (KWOK's own stays).
    assert f'"{maintenance["NAME"]}" deleted' in transcript
    assert handed_back["UNSCHEDULABLE"] == "<none>" and TAINT["key"] not in handed_back["TAINTS"], handed_back
    assert "## " in transcript and "Tear down" in transcript
