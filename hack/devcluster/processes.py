"""Child processes that die with their parent, which of them outlived a teardown, and free loopback ports."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent() -> None:
    """Runs in the child before exec: the kernel kills it if the harness dies, even by SIGKILL."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _started(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot); None once it has ended (a zombie has)."""
    try:
        state, *fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return None
    return None if state == "Z" else int(fields[18])  # stat's 22nd field


def identify(pids: list[int]) -> dict[int, int]:
    """The running processes among ``pids``, each with its start time: a pid alone may name another process
    later, as the kernel hands pids out again (tests spawn tens of thousands of kubectl processes)."""
    return {pid: started for pid in pids if (started := _started(pid)) is not None}


def survivors(identities: dict[int, int]) -> list[int]:
    """The processes of ``identify`` still running."""
    return [pid for pid, started in identities.items() if _started(pid) == started]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Process:
    """One component of the control plane, logging to a file."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        log_dir: Path,
        env: dict[str, str] | None = None,
        *,
        setup: Callable[[], None] | None = None,
        pass_fds: tuple[int, ...] = (),
    ) -> None:
        self.name = name
        self.argv = argv  # what a restart runs again
        self.log_path = log_dir / f"{name}.log"
        # The child keeps its own copy of the descriptor; ours is closed once it has been handed over.
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                preexec_fn=setup or die_with_parent,  # a PodNetwork's enter calls die_with_parent itself
                pass_fds=pass_fds,
            )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if it lingers; always reaps the child."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])
