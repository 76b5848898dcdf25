"""How `make test` spreads the tests over processes (pytest-xdist, ``--dist loadscope``): by what they share.

Each process starts its own control plane for the end-to-end tests. A package whose tests share a
package-scoped setup (the real-node cluster with every image published, and OLM running for the OLM
tests; the fault tests' proxy; the bad-input tests' operator log) goes to one process whole, so that
setup is made once. The OLM tests take longest and go first, the other real-node tests second (on a
real-node cluster of their own), the soak, which runs its own cluster for minutes, third; unit tests, the shortest,
then; the self-drain test, on a cluster with two real nodes, last, so that no more than two real-node clusters start
side by side.
"""

from __future__ import annotations

from typing import Any

import pytest

SHARED = ("tests/e2e/realnode/olm/", "tests/e2e/realnode/", "tests/e2e/faults/", "tests/e2e/badinput/", "tests/unit/")
# The order work units are taken in; the rest come between.
RANK = {"tests/e2e/realnode/olm/": 0, "tests/e2e/realnode/": 1, "tests/e2e/test_soak.py": 2, "tests/unit/": 4,
        "tests/e2e/selfdrain/test_self_drain.py": 5}


def work_unit(nodeid: str) -> str:
    """The tests sent to one process together: a package with a shared setup, or else one module."""
    module = nodeid.split("::", 1)[0]
    return next((package for package in SHARED if module.startswith(package)), module)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest work units first, unit tests last: the order the processes take them in."""
    items.sort(key=lambda item: RANK.get(work_unit(item.nodeid), 3))


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
