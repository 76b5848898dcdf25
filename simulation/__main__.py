"""``make simulate``: the search run for a given time, fresh seeds one after another, and its report.

    python -m simulation --minutes 60 --report build/simulation

Each seed runs EXAMPLES histories of one machine, the seeds taking turns between them (``search.MACHINES``: Search's
rules; Rolling's, which adds a node rolled through maintenance; Windowed's, under a window that closes every two
minutes; Late's, whose writes the server may carry out after the operator gave up on them; Zoned's, where a node
may move to a zone of its own; Killed's, where a failed request may be the operator's last; Closing's, with
maintenances created seconds before a window closes; and Retiring's, where a node leaves the pool as its maintenance
ends); a seed whose search finds a violation is reported
with its machine and the shortest history hypothesis shrank it to, and belongs in the bounded run's fixed seeds
(tests/simulation/test_search.py) once fixed. The report (report.json, report.txt) lists every seed tried, the histories
run and the violations found.
"""

from __future__ import annotations

import argparse
import json
import logging
import pathlib
import random
import re
import time
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as with_seed
from hypothesis.stateful import run_state_machine_as_test

from simulation import ROOT
from simulation.search import MACHINES

EXAMPLES = 20  # histories per seed
STEPS = 20  # rules per history, at most


def search(seed: int, examples: int = EXAMPLES, steps: int = STEPS, *, shrink: bool = True, machine: str = "search") -> str:
    """The violation the search of ``machine`` from ``seed`` found, shrunk unless ``shrink`` is False ("" when none)."""
    phases = tuple(Phase) if shrink else (Phase.explicit, Phase.reuse, Phase.generate)
    try:
        run_state_machine_as_test(with_seed(seed)(MACHINES[machine]), settings=settings(
            max_examples=examples, stateful_step_count=steps, deadline=None, database=None, print_blob=True,
            suppress_health_check=list(HealthCheck), phases=phases))
    except AssertionError as error:
        return _told(error)
    except ExceptionGroup as group:  # Hypothesis found several distinct failures while it shrank: each is told
        if not all(isinstance(error, AssertionError) for error in group.exceptions):
            raise
        return "\n\n".join(_told(error) for error in group.exceptions)
    return ""


def _told(error: BaseException) -> str:
    """A failure as the report tells it: the broken promise and the history, in the project's paths."""
    notes = getattr(error, "__notes__", [])
    return "\n".join([str(error), *notes]).replace(f"{ROOT}/", "")  # the project's paths, as a report committed shows them


def rules_run(found: str) -> int:
    """How many rules the failing history ``found`` ran (0: none failed)."""
    return len(re.findall(r"^state\.(?!promises_hold\(|teardown\()", found, flags=re.MULTILINE))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulation", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--report", type=pathlib.Path, default=pathlib.Path("build/simulation"))
    parser.add_argument("--until-found", action="store_true", help="stop at the first seed that finds a violation")
    parser.add_argument("--no-shrink", dest="shrink", action="store_false", help="report a failing history as found, unshrunk")
    parser.add_argument("--machine", dest="machines", action="append", choices=list(MACHINES),
                        help="search this machine (repeatable); every machine in turn when none is named")
    args = parser.parse_args(argv)
    machines = args.machines or list(MACHINES)
    logging.disable(logging.WARNING)  # the operator's own warnings under faults: expected, and the report says what matters
    ends, seeds = time.monotonic() + args.minutes * 60, random.SystemRandom()
    runs: list[dict[str, Any]] = []
    started = time.monotonic()
    while time.monotonic() < ends:
        seed, machine = seeds.randrange(2**32), machines[len(runs) % len(machines)]
        print(f"seed {seed} ({machine}): ", end="", flush=True)  # before the run, so a run that never ends still names its seed
        found = search(seed, shrink=args.shrink, machine=machine)
        runs.append({"seed": seed, "machine": machine, "histories": EXAMPLES, "violation": found, "steps": rules_run(found)})
        print("VIOLATION" if found else "no violation", flush=True)
        _report(args.report, runs, time.monotonic() - started)  # after every seed: a run stopped early keeps its report
        if found and args.until_found:
            break
    violations = [r for r in runs if r["violation"]]
    print(f"{len(runs)} seeds, {EXAMPLES * len(runs)} histories, {len(violations)} with a violation")
    return 1 if violations else 0


def _report(into: pathlib.Path, runs: list[dict[str, Any]], seconds: float) -> None:
    """report.json and report.txt under ``into``: the seeds tried so far, the histories run, the violations found."""
    violations = [r for r in runs if r["violation"]]
    into.mkdir(parents=True, exist_ok=True)
    summary = {"minutes": round(seconds / 60, 1), "seeds": len(runs), "histories": EXAMPLES * len(runs),
               "violations": len(violations), "runs": runs}
    (into / "report.json").write_text(json.dumps(summary, indent=1) + "\n")
    lines = [f"{summary['minutes']} min, {len(runs)} seeds, {summary['histories']} histories, {len(violations)} with a violation"]
    lines += [f"\nseed {r['seed']} ({r['machine']}, {r['steps']} steps):\n{r['violation']}" for r in violations]
    (into / "report.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
