"""The operator's memory over the soak's comparison: sampled once a second, compared as the median of the
first samples against the median of the last.

One reading at each end would compare moments, not levels: the process's resident memory moves by a few
MiB with how many TLS connections its pools hold at that second (each has a buffer of its own), which a
burst of requests or a reset of every connection changes.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from devcluster.operator import OperatorProcess

from .background import Background

SAMPLE_SECONDS = 1.0
WINDOW_SAMPLES = 10  # each end's level: the median of this many samples
# A fresh process keeps growing for its first minute after it is ready: its first lists, connections and
# caches, and the first tracebacks of each network fault (about 60 MiB when ready, 68 MiB a minute later,
# then level, on a quiet machine). Its memory is compared from at least a minute after it is ready and has
# met every fault, for at least half a minute (so a short soak lasts longer than asked).
WARMUP_SECONDS = (60.0, 120.0)
COMPARISON_SECONDS = 30.0


def warm_up_seconds(soak_seconds: float) -> float:
    """A sixth of the soak, within ``WARMUP_SECONDS``."""
    shortest, longest = WARMUP_SECONDS
    return min(longest, max(shortest, soak_seconds / 6))


def comparison_seconds(soak_seconds: float, elapsed: float) -> float:
    """What is left of the soak after ``elapsed``, and never less than ``COMPARISON_SECONDS``."""
    return max(COMPARISON_SECONDS, soak_seconds - elapsed)


@dataclass(frozen=True)
class Growth:
    start_bytes: float
    end_bytes: float

    @property
    def ratio(self) -> float:
        return self.end_bytes / self.start_bytes


def growth(samples: list[int], window: int = WINDOW_SAMPLES) -> Growth:
    """The level at the end against the level at the start, each the median of ``window`` samples; the two
    windows never overlap, so a short run compares its halves."""
    if len(samples) < 2:
        raise ValueError(f"memory needs at least two samples to compare, got {len(samples)}")
    window = min(window, len(samples) // 2)
    return Growth(statistics.median(samples[:window]), statistics.median(samples[-window:]))


class MemorySampler(Background):
    """Samples the running operator's resident memory once a second on a thread of its own, from
    ``__enter__`` to ``__exit__``."""

    def __init__(self, operator: OperatorProcess) -> None:
        super().__init__("memory sampler")
        self.operator = operator
        self.samples: list[int] = []

    def _run(self) -> None:
        while True:
            self.samples.append(self.operator.rss_bytes())
            if self._stop.wait(SAMPLE_SECONDS):
                return
