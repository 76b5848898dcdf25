"""How results look: rich tables and progress bars on a terminal, plain text in a pipe, JSON or YAML for scripts.

Whatever comes from the cluster (names, reasons, errors, annotations) is anyone's writing who may write there, so it
is shown, never obeyed: without control characters (an escape sequence could set the terminal's title, plant a
hyperlink or clear the screen) and never read as rich markup (``[/x]`` would make the rendering fail).
"""

from __future__ import annotations

import datetime
import json
import re
import sys
from typing import Any

import yaml
from rich.console import Console as Console  # re-exported: the commands hand consoles to the views
from rich.console import Group
from rich.live import Live
from rich.progress import BarColumn, Progress, TaskID, TextColumn
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

PHASE_STYLE = {"Running": "yellow", "Succeeded": "green", "Failed": "red"}
# C0 and C1 control characters and DEL: ESC and CSI, which begin escape sequences, among them.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SPACES = "\t\n\v\f\r"


def plain(value: Any, *, newlines: bool = False) -> str:
    """``value`` as text a terminal shows and never obeys: control characters removed, the whitespace ones (a newline
    too, unless ``newlines`` keeps it, as in a table cell) turned into spaces."""
    def replace(found: re.Match[str]) -> str:
        character = found.group()
        return character if newlines and character == "\n" else " " if character in _SPACES else ""

    return _CONTROL.sub(replace, str(value))


def cell(value: Any, style: str = "") -> Text:
    """A table cell showing ``value`` as it is (no markup), newlines kept."""
    return Text(plain(value, newlines=True), style=style)


def say(out: Console, message: str) -> None:
    """Print a message that names what the cluster holds: as plain text, never as markup."""
    out.print(plain(message), markup=False, highlight=False)


def console() -> Console:
    out = Console()
    if not out.is_terminal:  # a pipe or a file: keep long lines whole rather than wrapped at 80 columns
        out = Console(width=max(out.width, 200))
    return out


def emit(document: Any, output: str) -> None:
    """One document on stdout, as JSON or YAML (a YAML stream gets ``---`` between documents)."""
    if output == "json":
        sys.stdout.write(json.dumps(document, indent=2, sort_keys=False) + "\n")
    else:
        sys.stdout.write("---\n" + yaml.safe_dump(document, sort_keys=False))
    sys.stdout.flush()


def age(timestamp: str | None, now: datetime.datetime) -> str:
    """kubectl's short age: 45s, 12m, 5h, 3d."""
    if not timestamp:
        return ""
    then = datetime.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def summary(nm: dict[str, Any], now: datetime.datetime) -> dict[str, Any]:
    """What a person asks of one NodeMaintenance, read from its status."""
    status = nm.get("status") or {}
    return {
        "name": nm["metadata"]["name"],
        "node": nm["spec"]["nodeName"],
        "phase": "Stopping" if nm["metadata"].get("deletionTimestamp") else status.get("phase") or "Pending",
        "progress": status.get("drainProgress", 0),
        "pending": len(status.get("pendingPodsRefs") or status.get("pendingPods") or []),
        "evictionPods": status.get("evictionPods", 0),
        "age": age(nm["metadata"].get("creationTimestamp"), now),
        "reason": nm["spec"].get("reason", ""),
        "lastError": status.get("lastError", ""),
    }


def status_table(items: list[dict[str, Any]], now: datetime.datetime) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("NAME", "NODE", "PHASE", "PROGRESS", "PODS LEFT", "AGE", "REASON", "LAST ERROR"):
        table.add_column(column, overflow="fold")
    for nm in items:
        row = summary(nm, now)
        bar = Table.grid(padding=(0, 1))
        bar.add_row(ProgressBar(total=100, completed=row["progress"], width=20), f"{row['progress']:>3}%")
        table.add_row(cell(row["name"]), cell(row["node"]), cell(row["phase"], PHASE_STYLE.get(row["phase"], "")), bar,
                      cell(f"{row['pending']}/{row['evictionPods']}"), cell(row["age"]), cell(row["reason"]), cell(row["lastError"]))
    return table


def plan_view(plan: dict[str, Any]) -> Group:
    pods = Table(title=cell(f"Drain plan for node {plan['node']}"), box=None, header_style="bold", title_justify="left", pad_edge=False)
    for column in ("POD", "ACTION", "WHY", "BLOCKED BY"):
        pods.add_column(column, overflow="fold")
    style = {"evict": "yellow", "delete": "yellow", "stay": "dim"}
    for row in plan["pods"]:
        held = "; ".join(f"{b['kind']}: {', '.join(b['budgets'])}" for b in row["blockedBy"])
        pods.add_row(cell(f"{row['namespace']}/{row['name']}"), cell(row["action"], style[row["action"]]), cell(row["why"]), cell(held))
    parts: list[Any] = [pods]
    if plan["blockers"]:
        blockers = Table(title="PodDisruptionBudgets in the way", box=None, header_style="bold", title_justify="left", pad_edge=False)
        for column in ("BUDGET", "KIND", "PODS", "WHY AND FIX"):
            blockers.add_column(column, overflow="fold")
        for b in plan["blockers"]:
            kind = cell(b["kind"], "red" if b["kind"] == "structural" else "yellow")
            blockers.add_row(cell(", ".join(b["budgets"])), kind, cell(", ".join(b["pods"])), cell(b["reason"]))
        parts.append(blockers)
    s = plan["summary"]
    verdict = ("[green]the drain can finish" if plan["drainable"]
               else "[red]the drain cannot finish until an admin lifts the structural blocks above")
    parts.append(f"{s['evict']} to evict, {s['delete']} to delete, {s['stay']} stay; "
                 f"{s['blockedStructurally']} blocked structurally, {s['blockedTemporarily']} temporarily: {verdict}")
    if "escalation" in plan:
        ladder = Table(title="Escalation: pods deleted if still there", box=None, header_style="bold", title_justify="left", pad_edge=False)
        for column in ("STEP", "AT", "POD", "GRACE", "BYPASSES BUDGET"):
            ladder.add_column(column, overflow="fold")
        for step in plan["escalation"]:
            when = step["at"] or f"{step['afterSeconds']}s after the drain starts"
            for pod in step["pods"] or [{"namespace": "", "name": "", "gracePeriodSeconds": None, "budget": None}]:
                grace = "" if not pod["name"] else "the pod's own" if pod["gracePeriodSeconds"] is None else f"{pod['gracePeriodSeconds']}s"
                ladder.add_row(cell(step["action"]), cell(when), cell(f"{pod['namespace']}/{pod['name']}") if pod["name"] else cell("none", "dim"),
                               cell(grace), cell(pod["budget"] or ""))
        parts.append(ladder)
    if plan["inMaintenanceBy"]:
        parts.append(cell(f"node {plan['node']} is already in maintenance by NodeMaintenance {plan['inMaintenanceBy']}"))
    return Group(*parts)


class WaitView:
    """Shows a maintenance while a command waits on it: a live bar on a terminal, a line per change otherwise."""

    def __init__(self, out: Console, title: str) -> None:
        self.out = out
        self.title = plain(title)
        self._last = ""
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> WaitView:
        if self.out.is_terminal:
            self._progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                                      TextColumn("{task.fields[detail]}", markup=False), console=self.out, transient=False)
            self._progress.start()
            self._task = self._progress.add_task(self.title, total=100, detail="")
        return self

    def update(self, percent: int, detail: str) -> None:
        detail = plain(detail)
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=percent, detail=detail)
        elif f"{percent} {detail}" != self._last:
            self.out.print(f"{self.title}: {percent}% {detail}", soft_wrap=True, markup=False, highlight=False)
        self._last = f"{percent} {detail}"

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


def live(out: Console) -> Live:
    """A table redrawn in place on a terminal (``status --watch``)."""
    return Live(console=out, auto_refresh=False, transient=False)
