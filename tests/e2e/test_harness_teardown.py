"""Stopping the harness leaves nothing behind: no process, no listening port, no temporary directory."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from devcluster.processes import identify, survivors
from devcluster.waiting import polls
from node_maintenance.client.config import load_credentials

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def _start_cluster() -> tuple[subprocess.Popen[str], list[int], Path, int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "devcluster", "up", "--nodes", "1"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "hack")},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    pids: list[int] = []
    deadline = time.monotonic() + 120
    for line in proc.stdout:
        if match := re.search(r"processes: ([\d ]+)", line):
            pids = [int(p) for p in match.group(1).split()]
        if match := re.search(r"export KUBECONFIG=(\S+)", line):
            kubeconfig = Path(match.group(1))
            break
        assert time.monotonic() < deadline, "cluster did not come up"
    else:
        raise AssertionError(f"cluster exited early with {proc.wait()}")
    assert len(pids) == 5
    return proc, pids, kubeconfig.parent, urlsplit(load_credentials(str(kubeconfig)).server).port or 443


def _listeners(port: int) -> set[str]:
    """Inodes of the sockets listening on ``port``, read from the kernel's socket table (a probing connect
    could connect to itself when the port is free and inside the ephemeral range)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def _held_by_cluster(port: int, workdir: Path) -> bool:
    """Whether a process of the cluster in ``workdir`` still listens on ``port``. Clusters of other test
    processes run meanwhile and may take the same port once it is free: only ours counts."""
    sockets = {f"socket:[{inode}]" for inode in _listeners(port)}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if str(workdir) not in (proc / "cmdline").read_bytes().decode(errors="replace"):
                continue
            if any(os.readlink(fd) in sockets for fd in (proc / "fd").iterdir()):
                return True
        except OSError:
            continue  # gone meanwhile
    return False


def _eventually_gone(processes: dict[int, int], timeout: float = 30) -> list[int]:
    for _ in polls(timeout):
        if not survivors(processes):
            break
    return survivors(processes)


def test_ctrl_c_stops_every_component_and_removes_the_workdir() -> None:
    proc, pids, workdir, port = _start_cluster()
    processes = identify(pids)
    assert len(processes) == len(pids) and _held_by_cluster(port, workdir) and workdir.is_dir()
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 0
    assert _eventually_gone(processes) == []
    assert not _held_by_cluster(port, workdir)
    assert not workdir.exists()


def test_components_die_with_a_killed_harness() -> None:
    proc, pids, workdir, port = _start_cluster()
    processes = identify(pids)
    proc.kill()
    proc.wait()
    assert _eventually_gone(processes) == []
    assert not _held_by_cluster(port, workdir)
    # Only the temporary directory survives a SIGKILL: nothing was left to remove it.
    shutil.rmtree(workdir)
