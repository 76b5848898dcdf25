"""Wall-clock time per phase of the demo, so a slow run says where its time went."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from rich.table import Table

from .narrator import rounded


class Phases:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._started = time.monotonic()

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.monotonic() - started

    def total(self) -> float:
        return time.monotonic() - self._started

    def table(self) -> Table:
        table = Table(title="time per phase", title_justify="left", box=None, header_style="bold", pad_edge=False)
        table.add_column("PHASE")
        table.add_column("SECONDS", justify="right")
        for name, seconds in self.seconds.items():
            table.add_row(name, f"{seconds:.1f}")
        table.add_row("[bold]total", f"[bold]{self.total():.1f}")
        return table

    def plain(self) -> str:
        """The same, rounded, for the transcript."""
        width = max(len(name) for name in [*self.seconds, "total"])
        rows = [f"{name:<{width}}  {rounded(seconds)}" for name, seconds in self.seconds.items()]
        return "\n".join([*rows, f"{'total':<{width}}  {rounded(self.total())}"])
