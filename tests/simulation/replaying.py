"""One history of the search's Late machine, run rule by rule, its writes printed one per line as the simulated API
recorded them: ``python -m tests.simulation.replaying``. test_replay runs it in processes of different hash seeds."""

from __future__ import annotations

import json
import logging
from typing import Any

from simulation.search import Late

# Seed 1343346368 of Late, as shrunk: three maintenances, a ladder that deletes after 20 s, faults, a deletion.
SETUP: dict[str, Any] = {"nodes": 4, "parallel": 2, "ready_seconds": 30, "latency": 0.0, "ladder": (), "on_timeout": "Fail",
                         "zones": False, "window_end": None, "timeout": None, "faults": 38831, "wait_for_healthy": True}
RULES: list[tuple[str, dict[str, Any]]] = [
    ("change_the_drain_defaults", {"ladder": ((20, "DeletePods"),), "on_timeout": "Fail", "timeout": None}),
    ("change_the_limit", {"parallel": 2}), ("create_maintenance", {"node": 3}), ("create_maintenance", {"node": 1}),
    ("change_the_window", {"window_end": None}), ("create_maintenance", {"node": 0}), ("change_the_limit", {"parallel": 1}),
    ("wait", {"seconds": 3}), ("change_the_limit", {"parallel": 3}), ("faults", {"rate": 0.3}), ("wait", {"seconds": 23}),
    ("faults", {"rate": 0.0}), ("delete_maintenance", {"node": 1}), ("wait", {"seconds": 10}),
]


def writes() -> list[str]:
    """The writes the history made, each as a line of JSON."""
    machine = Late()
    machine.setup(**SETUP)
    for name, arguments in RULES:
        getattr(machine, name)(**arguments)
    recorded = [json.dumps([w.at.isoformat(), w.method, w.path, w.applied, w.body], sort_keys=True) for w in machine.running.api.writes]
    machine.teardown()
    return recorded


if __name__ == "__main__":
    logging.disable(logging.WARNING)
    print("\n".join(writes()))
