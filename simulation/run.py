"""One simulated run: the API, the cluster's actors and the operator on simulated time, stepped a simulated second at
a time, its history recorded and every promise checked after each step."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from node_maintenance.api.paths import POLICY_CRD, POLICY_VERSION, policy_path
from simulation import invariants, pooled, recorder
from simulation.apiserver import Fault, SimulatedApi
from simulation.clock import SimulatedTime, Spinning
from simulation.cluster import Cluster
from simulation.history import STEP_SECONDS, State, Step
from simulation.process import Process
from simulation.raising import Raised

POLICY_CRD_OBJECT = {"metadata": {"name": POLICY_CRD.rsplit("/", 1)[1]},
                     "spec": {"versions": [{"name": POLICY_VERSION, "served": True, "storage": True}]},
                     "status": {"conditions": [{"type": "Established", "status": "True"}]}}


class Simulation:
    """A cluster, its API and the operator, in one process on one simulated clock; use as a context manager."""

    def __init__(self, faults: Callable[[str, str], Fault] | None = None) -> None:
        self.time = SimulatedTime()
        self.api = SimulatedApi(self.time.now, faults or (lambda _m, _p: Fault.NONE))
        self.cluster = Cluster(self.api)
        self.process: Process | None = None
        self.history: list[Step] = []
        self.violations: list[str] = []
        self._tasks: list[asyncio.Task[Any]] = []
        self.raised = Raised()
        self._started = False  # the operator started since the last step
        self._lists_before = 0  # how many listings the API had answered when the running operator started
        self._listed: int | None = None  # the revision of the running operator's first listing of the policies, once made
        self._taken: State | None = None  # the state last taken from the API

    def __enter__(self) -> Simulation:
        logging.getLogger().addHandler(self.raised)
        self.time.__enter__()
        self.api.create(POLICY_CRD.rsplit("/", 1)[0], POLICY_CRD_OBJECT)
        self._tasks.append(self.time.loop.create_task(self.cluster.run(), name="cluster"))
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self.process is not None:
                self.time.run(self.process.stop())
        except Spinning:
            pass  # already a violation: the loop is closed below, whatever still spins
        finally:
            logging.getLogger().removeHandler(self.raised)
        self.time.__exit__(*exc)

    def start_operator(self) -> None:
        self.api.killed = False  # a kill drawn as the last process stopped is that process's
        self._started = True
        self._lists_before, self._listed = len(self.api.listed), None
        self.api.told.pop(policy_path(), None)  # the new process knows nothing of the policies until it lists them
        self.process = Process(self.api)
        self.time.run(_started(self.process))

    def restart_operator(self) -> None:
        """The operator killed and started again: it keeps nothing but what the API holds. What the old process wrote as
        it was stopped (a timer due at the instant of the kill, a request under way) is a step of its own, of no length,
        checked as any other."""
        if self.process is not None:
            before, written = self._state(), len(self.api.writes)
            self.time.run(self.process.stop())
            if len(self.api.writes) > written:
                self._record(before, written)
        self.start_operator()

    def step(self, seconds: float = STEP_SECONDS) -> list[str]:
        """Let everything run ``seconds`` of simulated time, record the step and check the promises on it."""
        before, written = self._state(), len(self.api.writes)
        try:
            self.time.advance(seconds)
        except Spinning as spin:  # the run cannot go on: its clock would never move again
            self.violations.append(f"at {self.time.now():%H:%M:%S}: nothing spins: {spin}")
            raise AssertionError("\n".join(self.violations)) from spin
        found = self._record(before, written)
        if self.api.killed:  # a write was its operator's last (Fault.KILLED): it dies within the step it was sent in
            self.restart_operator()
        return found

    def _record(self, before: State, written: int) -> list[str]:
        """The step from ``before`` to now, by the writes since the ``written``-th, added to the history; what it broke."""
        after = self._state()
        if self._listed is None:
            self._listed = next((revision for path, revision in self.api.listed[self._lists_before:] if path == policy_path()), None)
            self._lists_before = len(self.api.listed)
        self.history.append(Step(before=before, actions=recorder.actions(self.api.writes[written:], before), after=after,
                                 started=self._started, listed=self._listed, told=self.api.told.get(policy_path())))
        self._started = False
        found = [*invariants.violations(self.history), *self.raised.taken(), *pooled.differences(self.process)]
        self.violations += [f"at {after.at:%H:%M:%S}: {v}" for v in found]
        return found

    def _state(self) -> State:
        """The cluster as the API holds it now: the state last taken while neither the API nor the clock has moved since
        (a step's end is the next one's start, unless a rule wrote in between), else a new one."""
        if self._taken is None or (self._taken.revision, self._taken.at) != (self.api.revision, self.api.clock()):
            self._taken = recorder.state(self.api)
        return self._taken

    def run_for(self, seconds: float) -> None:
        for _ in range(int(seconds / STEP_SECONDS)):
            self.step()


async def _started(process: Process) -> None:
    process.start()
    await asyncio.sleep(0)
