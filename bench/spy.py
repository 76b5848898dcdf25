"""py-spy sampling the operator during a case, and a summary of where its samples fell."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def profile(pid: int, seconds: int, out: Path) -> subprocess.Popen[bytes]:
    """py-spy samples the operator (flame graph as SVG, plus raw stacks for the summary)."""
    return subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(pid), "--duration", str(seconds),
                             "--format", "raw", "--output", str(out), "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@contextlib.contextmanager
def profiling(pid: int, stacks: Path | None) -> Iterator[None]:
    """py-spy samples ``pid`` into ``stacks`` meanwhile (nothing without ``stacks``)."""
    spy = profile(pid, 900, stacks) if stacks else None
    try:
        yield
    finally:
        if spy:
            spy.send_signal(signal.SIGINT)  # py-spy writes what it sampled when interrupted
            spy.wait()


def hottest(raw: Path, top: int = 12) -> list[dict[str, Any]]:
    """The functions the operator spent most samples in (self time), from py-spy's collapsed stacks."""
    own: Counter[str] = Counter()
    total = 0
    for line in (raw.read_text(errors="replace") if raw.exists() else "").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue  # not a "stack count" line
        total += int(count)
        own[stack.split(";")[-1]] += int(count)
    return [{"function": name, "share": round(n / total, 3)} for name, n in own.most_common(top)] if total else []
