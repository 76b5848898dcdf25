"""The drain, live: a rich progress bar of the pods left, the PodDisruptionBudget holding a pod back (in
the operator's own words, from the NodeMaintenance status) and the elapsed time; the transcript keeps
the milestones."""

from __future__ import annotations

import datetime
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from node_maintenance_cli import views

from .narrator import Narrator

POLL_SECONDS = 0.5


@dataclass
class Drain:
    """What the watch saw: the distinct counts of pods left, every distinct hold, the final object."""

    left: list[int] = field(default_factory=list)
    holds: list[str] = field(default_factory=list)
    final: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def saw(self, row: dict[str, Any]) -> list[str]:
        """Take one status summary (views.summary); the holds not seen before."""
        if row["phase"] != "Pending" and (not self.left or self.left[-1] != row["pending"]):
            self.left.append(row["pending"])
        new = [part for part in row["lastError"].split("; ") if part and part not in self.holds]
        self.holds += new
        return new


def watch(read: Callable[[], dict[str, Any] | None], narrator: Narrator, title: str, said: queue.Queue[str],
          check: Callable[[], None], timeout: float = 180) -> Drain:
    """Poll the NodeMaintenance through ``read`` until it is Succeeded; lines put on ``said`` (by
    another actor) are told as they come, ``check`` raises when that actor failed."""
    drain = Drain()
    started = time.monotonic()
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[left]}"),
               TimeElapsedColumn(), TextColumn("{task.fields[held]}"))
    with narrator.log() as log, Progress(*columns, console=narrator.screen) as bar:
        task = bar.add_task(title, total=None, left="", held="")
        while True:
            check()
            while not said.empty():
                log(said.get(), time.monotonic() - started)
            nm = read()
            if nm is None:
                raise RuntimeError("the NodeMaintenance disappeared during its drain")
            row = views.summary(nm, datetime.datetime.now(datetime.UTC))
            for hold in drain.saw(row):
                log(f"held back: {hold}", time.monotonic() - started)
            total = row["evictionPods"]
            holds = row["lastError"].split("; ") if row["lastError"] else []
            held = f"{holds[0]}" + (f" (+{len(holds) - 1} more)" if len(holds) > 1 else "") if holds else ""
            bar.update(task, total=total or None, completed=total - row["pending"], left=f"{row['pending']}/{total} pods left",
                       held=held)
            if row["phase"] == "Failed":
                raise RuntimeError(f"the maintenance failed: {row['lastError']}")
            if row["phase"] == "Succeeded":
                drain.final, drain.seconds = nm, time.monotonic() - started
                log("pods left, as the drain went: " + ", ".join(map(str, drain.left)), drain.seconds)
                break
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"the drain did not finish within {timeout:.0f}s: {row['phase']}, {row['lastError']}")
            time.sleep(POLL_SECONDS)
    narrator.say_took(f"{drain.final['metadata']['name']} Succeeded after {{}}: {row['evictionPods']} pods evicted, "
                      f"{row['pending']} left", drain.seconds)
    return drain
