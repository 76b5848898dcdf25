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
