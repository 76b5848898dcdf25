"""The budget watch: a budget's change wakes only the drains of its namespace, and evictions sent count
against their budget until the budget shows the pod disrupted."""

from __future__ import annotations

import asyncio
import functools

from node_maintenance.api.paths import BUDGETS
from node_maintenance.runtime.budget_watch import IN_FLIGHT_SECONDS, BudgetWatch
from tests.unit.builders import FakeApi, budget, script_watch_scene


def test_a_budget_change_wakes_only_the_drains_of_its_namespace() -> None:
    api = FakeApi()
    script_watch_scene(api, BUDGETS, expire=False)
    woken: list[str] = []
    budgets = BudgetWatch(api)

    async def scenario() -> None:
        for drain, namespaces in (("ns drain", {"ns"}), ("other drain", {"other"}), ("idle drain", set())):
            budgets.subscribe(functools.partial(woken.append, drain), namespaces.copy)
        await asyncio.wait_for(api.idle.wait(), 5)
        await budgets.stop()

    asyncio.run(scenario())
    # The listing wakes every drain; then b in ns, d in other, a in ns, d in other.
    assert woken.count("idle drain") == 1
    assert woken.count("ns drain") == 3 and woken.count("other drain") == 3


def test_sent_evictions_count_until_the_budget_lists_the_pod_as_disrupted() -> None:
    async def scenario() -> None:  # counted on the event loop's clock, as the drains count them
        budgets = BudgetWatch(FakeApi())
        budgets.mirror.take({"type": "ADDED", "object": budget("web", namespace="app", status={"disruptedPods": {}})})
        budgets.sent("app/web", "web-0")
        budgets.sent("app/web", "web-1")
        assert budgets.in_flight()["app/web"].count == 2
        assert 0 < budgets.in_flight()["app/web"].expires_in <= IN_FLIGHT_SECONDS  # counted no longer, should no event come
        budgets.mirror.take({"type": "MODIFIED", "object": budget("web", namespace="app", status={"disruptedPods": {"web-0": "2026-01-01T00:00:00Z"}})})
        assert budgets.in_flight()["app/web"].count == 1
        budgets.returned("app/web", "web-1")  # refused: it does not count
        assert budgets.in_flight() == {}

    asyncio.run(scenario())


def test_a_deletion_past_a_budget_counts_against_it_for_a_while_whatever_the_budget_shows() -> None:
    """Seed 2804261928 of Rolling: a ladder's deletion past a budget that then allowed one disruption, on a count
    made with the deleted pod still healthy; another drain's eviction under that count would leave the budget short.
    The budget's next write may be the Eviction API's own (an eviction accepted, listed as disrupted), not a recount:
    the deletion holds the budget through it, for as long as an eviction the watch never shows would."""
    async def scenario() -> None:
        budgets = BudgetWatch(FakeApi())
        budgets.mirror.take({"type": "ADDED", "object": budget("web", namespace="app", resource_version="7", allowed=2)})
        budgets.sent("app/web", "q", bypassing=True)
        budgets.sent("app/web", "web-1")
        assert budgets.in_flight()["app/web"].count == 2
        accepted = budget("web", namespace="app", resource_version="8", allowed=1, status={"disruptedPods": {"web-1": "2026-01-01T00:00:00Z"}})
        budgets.mirror.take({"type": "MODIFIED", "object": accepted})
        assert budgets.in_flight()["app/web"].count == 1  # the eviction is counted by the budget; the deletion is not yet
        assert 0 < budgets.in_flight()["app/web"].expires_in <= IN_FLIGHT_SECONDS
        budgets.sent("app/other", "p", bypassing=True)
        budgets.returned("app/other", "p")  # refused: it does not count
        assert set(budgets.in_flight()) == {"app/web"}

    asyncio.run(scenario())
