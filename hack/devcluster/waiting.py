"""Waiting on the cluster: poll a check, and fail with the log that explains why it never held."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

from .processes import Process

T = TypeVar("T")


class ClusterError(RuntimeError):
    pass


def wait_for(what: str, check: Callable[[], T], timeout: float, process: Process | None = None,
             details: Callable[[], str] | None = None) -> T:
    """Poll ``check`` until it returns something truthy and return that; fail naming ``what``, with the
    log of ``process`` (which must stay alive meanwhile) or ``details``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and not process.alive():
            raise ClusterError(f"{process.name} exited while waiting for {what}:\n{process.log_tail()}")
        result = check()
        if result:
            return result
        time.sleep(0.2)
    tail = f"\n{process.log_tail()}" if process else f"\n{details()}" if details else ""
    raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}{tail}")
