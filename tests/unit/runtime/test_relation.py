"""The relation the policies' watches keep both ways: a change of one key is seen from its values at once."""

from __future__ import annotations

from node_maintenance.runtime.policies.relation import Relation


def test_a_key_moved_from_one_value_to_another_is_found_only_under_the_new_one() -> None:
    selection = Relation([("n1", ("pool-a",)), ("n2", ("pool-a", "pool-b")), ("n3", ())])
    assert selection.having("pool-a") == {"n1", "n2"}
    assert selection.set("n2", ("pool-b",)) == ("pool-a", "pool-b")
    assert (selection.having("pool-a"), selection.having("pool-b")) == (frozenset({"n1"}), frozenset({"n2"}))
    assert selection.forward == {"n1": ("pool-a",), "n2": ("pool-b",), "n3": ()}  # a node no policy selects is still known


def test_a_key_dropped_is_gone_both_ways_and_says_what_it_related_to() -> None:
    holders = Relation([("n1", ("nm-1",))])
    assert holders.drop("n1") == ("nm-1",)
    assert (holders.having("nm-1"), holders.of("n1"), dict(holders.forward)) == (frozenset(), (), {})
    assert holders.drop("n1") == ()
