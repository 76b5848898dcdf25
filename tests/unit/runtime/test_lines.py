"""Each policy's line kept in order as maintenances come and go: whatever the changes, a line read is the one a sort of
its maintenances gives, and it is gathered and sorted only when first read after it was forgotten."""

from __future__ import annotations

import functools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from node_maintenance.policy import line
from node_maintenance.runtime.policies.lines import Lines
from tests.unit.builders import runtime_nm

POLICIES = ("a", "b")
# (maintenance name, the second it was created, the policies selecting its node)
Entry = tuple[str, int, frozenset[str]]
entries = st.tuples(st.sampled_from([f"w-{i}" for i in (1, 2, 9, 10, 11)] + ["w-09", "x"]), st.integers(0, 3),
                    st.frozensets(st.sampled_from(POLICIES)))
changes = st.lists(st.one_of(st.tuples(st.just("create"), entries), st.tuples(st.just("delete"), entries),
                             st.tuples(st.just("move"), entries), st.tuples(st.just("read"), entries), st.tuples(st.just("forget"), entries)),
                   max_size=40)


def made(name: str, second: int) -> dict[str, Any]:
    return runtime_nm(name, f"node-{name}", created=f"2026-01-01T00:00:0{second}Z")


class Cluster:
    """What the watches know: each maintenance and the policies selecting its node."""

    def __init__(self) -> None:
        self.maintenances: dict[str, tuple[dict[str, Any], frozenset[str]]] = {}
        self.gathered = 0

    def of(self, policy: str) -> list[dict[str, Any]]:
        self.gathered += 1
        return [m for m, policies in self.maintenances.values() if policy in policies]

    def sorted(self, policy: str) -> list[str]:
        return [m["metadata"]["name"] for m in sorted(self.of(policy), key=line.order)]


@settings(max_examples=300, deadline=None)
@given(changes)
def test_a_line_read_is_its_maintenances_sorted_whatever_came_and_went(steps: list[tuple[str, Entry]]) -> None:
    lines, cluster = Lines(), Cluster()
    for change, (name, second, policies) in steps:
        known = cluster.maintenances.get(name)
        if change == "create" and known is None:
            cluster.maintenances[name] = (made(name, second), policies)
            lines.join(cluster.maintenances[name][0], policies)
        elif change == "delete" and known is not None:
            del cluster.maintenances[name]
            lines.gone(name, known[1])
        elif change == "move" and known is not None:  # its node relabelled into other pools
            cluster.maintenances[name] = (known[0], policies)
            lines.leave(name, known[1] - policies)
            lines.join(known[0], policies - known[1])
        elif change == "forget":  # a listing, or a policy edited
            lines.forget()
        elif change == "read":  # a pool's decision: that line alone is kept from now on
            read = min(policies or POLICIES)
            assert lines.of(read, functools.partial(cluster.of, read)) == cluster.sorted(read), steps
    for policy in POLICIES:
        assert lines.of(policy, functools.partial(cluster.of, policy)) == cluster.sorted(policy), (policy, steps)


def test_a_line_is_sorted_once_then_kept_in_order_as_maintenances_join_and_leave() -> None:
    cluster = Cluster()
    lines = Lines()
    for i in (3, 1, 2):
        cluster.maintenances[f"w-{i}"] = (made(f"w-{i}", 0), frozenset({"a"}))
    assert lines.of("a", lambda: cluster.of("a")) == ["w-1", "w-2", "w-3"]
    cluster.gathered = 0
    newcomer = made("w-10", 0)
    lines.join(newcomer, {"a"})
    lines.gone("w-2", {"a"})
    assert lines.of("a", lambda: cluster.of("a")) == ["w-1", "w-3", "w-10"]
    assert cluster.gathered == 0, "a kept line is not gathered again"
    lines.join(newcomer, {"a"})  # told again (its status changed): it keeps its one place
    assert lines.of("a", lambda: cluster.of("a")) == ["w-1", "w-3", "w-10"]
    lines.forget()
    assert lines.of("a", lambda: cluster.of("a")) == ["w-1", "w-2", "w-3"]
    assert cluster.gathered == 1, "a forgotten line is gathered again"
