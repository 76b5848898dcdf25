"""How `make test` spreads the tests over processes (pytest-xdist, ``--dist loadscope``): by what they share.

Each process starts its own control plane for the end-to-end tests. A package whose tests share a
package-scoped setup (the real-node cluster with every image published, and OLM running for the OLM
tests; the fault tests' proxy; the bad-input tests' operator log) goes to one process whole, so that
setup is made once; other end-to-end tests go by module; unit tests and the bounded search's histories, which only
compute, go one module or one history at a time, last, to whichever process is free, so that the processes end
together.

The order the work is taken in: the OLM tests, which take longest; the other real-node tests (on a real-node cluster
of their own); the soak, which runs its own cluster for minutes; the bad-input tests; then the self-drain test, on a
cluster with two real nodes. xdist hands a process more work once two or fewer of its tests are left, so the bad-input
tests are queued behind the soak, the one test of its process, at once, and the self-drain test behind them: it starts
minutes later, once the two real-node clusters before it have started, never beside their start.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

SHARED = ("tests/e2e/realnode/olm/", "tests/e2e/realnode/", "tests/e2e/faults/", "tests/e2e/badinput/")
# Modules whose tests go to processes one by one.
ONE_BY_ONE = ("tests/simulation/test_search.py",)
# The order work is taken in, by where it belongs (a package, a module, a directory); the rest come between.
FIRST = ("tests/e2e/realnode/olm/", "tests/e2e/realnode/", "tests/e2e/test_soak.py", "tests/e2e/badinput/",
         "tests/e2e/selfdrain/test_self_drain.py")
LAST = ("tests/unit/", "tests/simulation/test_search.py")


def group(nodeid: str) -> str:
    """Where a test belongs: a package with a shared setup, or else its module."""
    module = nodeid.split("::", 1)[0]
    return next((package for package in SHARED if module.startswith(package)), module)


def work_unit(nodeid: str) -> str:
    """The tests sent to one process together: the test alone if its module's go one by one, or else its group."""
    return nodeid if nodeid.split("::", 1)[0] in ONE_BY_ONE else group(nodeid)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest work units first, those that only compute last: the order the processes take them in."""
    items.sort(key=lambda item: rank(group(item.nodeid)))


def pytest_runtest_protocol(item: pytest.Item) -> None:
    """Each test's process and start time go beside its duration in the JUnit report (build/test-report.xml), so the report
    shows each process's timeline: which tests ran beside which, and which process ended last."""
    item.user_properties += [("worker", os.environ.get("PYTEST_XDIST_WORKER", "main")), ("started", f"{time.time():.1f}")]


def rank(belongs: str) -> int:
    """The place in the order of work that belongs there (``group``): FIRST's in turn, then the rest, then LAST's."""
    if belongs in FIRST:
        return FIRST.index(belongs)
    return next((len(FIRST) + 1 + i for i, prefix in enumerate(LAST) if belongs.startswith(prefix)), len(FIRST))


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedSetupScheduling(LoadScopeScheduling):
        """xdist's scope scheduling, its scopes given by ``work_unit``, taken in collection order."""

        def __init__(self, config: pytest.Config, log: Any = None) -> None:
            super().__init__(config, log)
            config.option.loadscopereorder = False

        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return SharedSetupScheduling(config, log)
