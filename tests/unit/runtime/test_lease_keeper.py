"""A node name near the 253-character limit leaves no room for its remediation Lease (node-<name>): the
Lease is reported as unavailable and the maintenance goes on, instead of every drain step failing."""

from __future__ import annotations

import asyncio
import datetime

from node_maintenance.api.paths import lease_path
from node_maintenance.client.errors import Invalid
from node_maintenance.coordination import remediation
from node_maintenance.coordination.remediation import lease_name
from node_maintenance.runtime.leases import LeaseKeeper
from tests.unit import builders
from tests.unit.builders import FakeApi

LONGEST_NODE_NAME = "n" * 253
TOO_LONG = f"metadata.name: Invalid value: {lease_name(LONGEST_NODE_NAME)!r}: must be no more than 253 characters"


def test_a_lease_name_past_the_limit_is_a_reported_problem() -> None:
    node = builders.node(LONGEST_NODE_NAME, uid="u")
    api = FakeApi()  # the API server's answers for a Lease whose name is too long: not found, and refused when created
    api.fail("POST", lease_path("medik8s-leases"), Invalid(422, "Unprocessable Entity", TOO_LONG))
    keeper = LeaseKeeper(api, "medik8s-leases", LONGEST_NODE_NAME)
    view = asyncio.run(keeper.view())
    claim = remediation.standing(view, node, datetime.datetime.now(datetime.UTC)).claim
    assert view.due and claim is not None and claim.create
    state = asyncio.run(keeper.write(claim))
    assert not state.held and "must be no more than 253 characters" in state.problem
    condition = remediation.condition(state)
    assert (condition.status, condition.reason) == ("False", "LeaseUnavailable") and "could not be held" in condition.message


def test_the_lease_is_read_again_before_the_node_is_taken() -> None:
    # Known as ours from an earlier claim, then deleted (the garbage collector removes it with its Node): a
    # plan about to take the node sees it as it is now, not as it was.
    api = FakeApi()
    keeper = LeaseKeeper(api, "medik8s-leases", "w1")

    async def scenario() -> None:  # due on the event loop's clock
        keeper.remember(remediation.LeaseState("medik8s-leases", "w1", recheck_in=remediation.REMEDIATION_LEASE_SECONDS / 2))
        cached = await keeper.view()
        assert not cached.due and api.calls == []
        fresh = await keeper.view(fresh=True)
        assert fresh.due and fresh.read is None and [c.path for c in api.calls] == [lease_path("medik8s-leases", lease_name("w1"))]

    asyncio.run(scenario())


def test_a_created_lease_is_renewed_to_the_hour_within_its_first_term() -> None:
    """A create whose answer was lost may be carried out after the maintenance released the node: the Lease it leaves
    holds for a minute. The keeper renews within that minute, and then each half hour."""
    node = builders.node("w1", uid="u")
    api = FakeApi()
    keeper = LeaseKeeper(api, "medik8s-leases", "w1")
    now = datetime.datetime.now(datetime.UTC)
    created = remediation.standing(asyncio.run(keeper.view()), node, now).claim
    assert created is not None and created.create and created.body["spec"]["leaseDurationSeconds"] == remediation.FIRST_LEASE_SECONDS
    assert asyncio.run(keeper.write(created)).recheck_in == remediation.FIRST_LEASE_SECONDS / 2
    ours = {**created.body, "metadata": {**created.body["metadata"], "resourceVersion": "1"}}
    renewed = remediation.standing(remediation.LeaseView("medik8s-leases", "w1", due=True, read=ours), node, now).claim
    assert renewed is not None and not renewed.create and renewed.body["spec"]["leaseDurationSeconds"] == remediation.REMEDIATION_LEASE_SECONDS
    assert asyncio.run(keeper.write(renewed)).recheck_in == remediation.REMEDIATION_LEASE_SECONDS / 2
