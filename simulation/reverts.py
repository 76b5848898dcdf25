"""``python -m simulation.reverts``: does the search find by itself what the reviews found?

Each fix of a break the reviews found (issue "Safety found by search") is reverted in a copy of the operator's code,
one at a time, and the search runs from fresh seeds, unshrunk, until it finds a violation or its time is up. The
report (reverts.json, reverts.txt) gives for each whether it was found, after how many rules of a history, and the
seed. A revert whose fixed code is no longer where it names fails loudly: the table then needs its new place.

    python -m simulation.reverts --minutes 10 --report build/simulation
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from simulation import ROOT
from simulation.search import MACHINES


@dataclass(frozen=True)
class Revert:
    """The fix of break ``number`` undone: ``fixed`` (found once in ``path``) put back as ``reverted``."""

    number: str
    what: str
    path: str
    fixed: str
    reverted: str


REVERTS = (
    Revert("1", "the timeout and the ladder keep running after the drain succeeded",
           "operator/node_maintenance/drain/draining.py", "drained=status.drained_once(previous),", "drained=False,"),
    Revert("2", "a node given back while its policy's status is written is forgotten",
           "operator/node_maintenance/runtime/policies/publisher.py",
           "self.recovery.written(name, snapshot.given_back, snapshot.gave_up)",
           "self.recovery.written(name, frozenset(self.recovery.given_back.get(name, {})), snapshot.gave_up)"),
    Revert("3", "onTimeout HandBack gives the node back without waiting for health",
           "operator/node_maintenance/runtime/engine.py",
           "ready = (functools.partial(giving_back.recovering, policies, {**reading.body, \"status\": decided.status})\n"
           "                 if policies and decided.handback is not None else None)",
           "ready = None"),
    Revert("4", "escalation deletes pods the drain rules keep or wait for",
           "operator/node_maintenance/drain/draining.py", "or pod.uid in step.held or pod.finished", "or pod.finished"),
    Revert("5a", "a node relabelled out of its pool while held escapes its policy",
           "operator/node_maintenance/policy/model.py",
           "if p.selects(node) or p.name == recorded}", "if p.selects(node)}"),
    Revert("5b", "a replaced policy releases its drains and its queue at once",
           "operator/node_maintenance/runtime/policies/unseen.py", "DEPARTED_GRACE_SECONDS = 30.0", "DEPARTED_GRACE_SECONDS = 0.0"),
    Revert("6", "the timeout's hand-back goes on when the status recording it was not written",
           "operator/node_maintenance/runtime/executor.py",
           "            return Outcome(lease=lease, status_failed=True, status_unanswered=unanswered, missing=await self._missing(error))\n",
           "            if plan.handback is None:\n                return Outcome(lease=lease, status_failed=True, status_unanswered=unanswered, missing=await self._missing(error))\n"
           "            written = False\n"),
    Revert("7", "a recovering node alone in its zone makes the shared decision raise",
           "operator/node_maintenance/policy/line.py",
           "            if domain not in self.size:\n                continue\n", ""),
    Revert("8", "the drain's removals go on when the status recording their workloads was not written",
           "operator/node_maintenance/runtime/executor.py",
           "            return Outcome(lease=lease, status_failed=True, status_unanswered=unanswered, missing=await self._missing(error))\n",
           "            if plan.handback is not None:\n                return Outcome(lease=lease, status_failed=True, status_unanswered=unanswered, missing=await self._missing(error))\n"
           "            written = False\n"),
    Revert("9", "under windowEnd Pause, a slot granted before the close drains after it",
           "operator/node_maintenance/policy/terms.py", "    if verdict.paused:", "    if holds and verdict.paused:"),
    Revert("10", "a node maintained again while recovering keeps its old entry",
           "operator/node_maintenance/runtime/policies/view.py",
           "if earlier is not None and (taken is None or timestamps.parse(earlier[\"since\"]) >= taken):", "if earlier is not None:"),
    Revert("12", "the deletion handler gives the node back while the cancelled drain still takes it (found by the soak)",
           "operator/node_maintenance/runtime/maintenances.py",
           "        running = self.running.get(name)\n        if running is None or running.task is None:\n            return\n",
           "        running = self.running.pop(name, None)\n        if running is None or running.task is None:\n            return\n"),
    Revert("13", "a drain under no policy records nothing it evicts: relabelled into a pool that waits for health, its node frees its slot at once (found by review)",
           "operator/node_maintenance/drain/draining.py",
           "    evicting = tuple((f.budgets, f.pod) for f in scene.to_go if not f.finished)\n",
           "    evicting = tuple((f.budgets, f.pod) for f in scene.to_go if not f.finished) if m.terms.rules is not None else None\n"),
    Revert("14", "a hand-back tried again after its recovering entry's write failed goes on with the entry in memory only (found by review)",
           "operator/node_maintenance/runtime/policies/view.py",
           "            if node not in health.listed(stored):\n                await self.publisher.write()\n", ""),
)


def reverted_text(revert: Revert) -> str:
    """The file ``revert`` names as it reads with the fix undone; a fix no longer found once there fails loudly."""
    text = (ROOT / revert.path).read_text()
    if text.count(revert.fixed) != 1:
        raise SystemExit(f"break {revert.number}: its fix is not found once in {revert.path}; update simulation/reverts.py")
    return text.replace(revert.fixed, revert.reverted)


def _reverted(revert: Revert, into: pathlib.Path) -> pathlib.Path:
    """A copy of the operator's code with ``revert`` applied, under ``into``."""
    text = reverted_text(revert)
    shutil.copytree(ROOT / "operator", into / "operator", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    (into / revert.path).write_text(text)
    return into / "operator"


def _first_violation(report: pathlib.Path) -> dict[str, object] | None:
    runs = json.loads((report / "report.json").read_text())["runs"]
    return next((r for r in runs if r["violation"]), None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulation.reverts", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="time for each revert's search")
    parser.add_argument("--report", type=pathlib.Path, default=pathlib.Path("build/simulation"))
    parser.add_argument("--machine", dest="machines", action="append", default=[], choices=list(MACHINES),
                        help="search only this machine (repeatable; see python -m simulation)")
    parser.add_argument("breaks", nargs="*", help="the breaks to revert (all when none is named)")
    args = parser.parse_args(argv)
    chosen = [r for r in REVERTS if not args.breaks or r.number in args.breaks]
    rows = []
    for revert in chosen:
        with tempfile.TemporaryDirectory() as scratch:
            operator = _reverted(revert, pathlib.Path(scratch))
            report = args.report / f"revert-{revert.number}"
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(operator), str(ROOT / "hack"), str(ROOT)])}
            report.mkdir(parents=True, exist_ok=True)
            (report / "report.json").unlink(missing_ok=True)  # a run that ends before its first seed leaves none: no stale answer
            with (report / "output.txt").open("w") as output:  # the seeds as they run, and the operator's errors
                subprocess.run([sys.executable, "-m", "simulation", "--minutes", str(args.minutes), "--report", str(report),
                                "--until-found", "--no-shrink", *(f"--machine={m}" for m in args.machines)], env=env, check=False, stdout=output, stderr=subprocess.STDOUT)
        found = _first_violation(report)
        first = str(found["violation"]).splitlines()[0] if found else ""
        rows.append({"break": revert.number, "what": revert.what, "found": found is not None,
                     "seed": found["seed"] if found else None, "machine": found["machine"] if found else None,
                     "steps": found["steps"] if found else None,
                     "seeds tried": len(json.loads((report / "report.json").read_text())["runs"]), "violation": first})
        print(f"break {revert.number}: {'found' if found else 'not found'} {first}", flush=True)
    args.report.mkdir(parents=True, exist_ok=True)
    (args.report / "reverts.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = ["| break | reverted | found | rules | seed | machine | seeds tried | violation |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r['break']} | {r['what']} | {'yes' if r['found'] else 'no'} | {r['steps'] or ''} | {r['seed'] or ''} | {r['machine'] or ''} | "
              f"{r['seeds tried']} | {re.sub(r'[|]', '/', str(r['violation']))} |" for r in rows]
    (args.report / "reverts.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
