"""What a NodeMaintenance or a policy asks of its author: `kubectl drain`'s rights for a maintenance, and the right to
escalate for an escalation ladder, its own or inherited from the drain defaults of the policy that selects its node."""

from __future__ import annotations

from typing import Any

import pytest

from node_maintenance.policy import authority
from node_maintenance.policy.authority import Access
from tests.unit.builders import nm, nm_policy

LADDER = [{"afterSeconds": 60, "action": "DeletePods"}]
PATCH_NODE = (Access("patch", "nodes", name="n1", namespaced=False),)
EVICT = (Access("create", "pods", subresource="eviction"),)
ESCALATE = (Access("escalate", "nodemaintenances", group="nodemaintenance.kubevirt.io", namespaced=False), Access("delete", "pods"))


@pytest.mark.parametrize(("obj", "policy_drains", "asked"), [
    pytest.param(nm(), (), [PATCH_NODE, EVICT], id="a maintenance asks what kubectl drain asks"),
    pytest.param(nm(drain={"escalation": LADDER}), (), [PATCH_NODE, EVICT, ESCALATE], id="its own ladder asks to escalate"),
    pytest.param(nm(), ({"escalation": LADDER},), [PATCH_NODE, EVICT, ESCALATE], id="a ladder inherited from a policy asks it too"),
    pytest.param(nm(drain={"escalation": []}), ({"escalation": LADDER},), [PATCH_NODE, EVICT], id="an empty ladder inherits none"),
    pytest.param(nm(drain={"timeoutSeconds": 60}), ({"timeoutSeconds": 30},), [PATCH_NODE, EVICT], id="drain defaults without a ladder ask nothing more"),
])
def test_what_a_maintenance_asks_of_its_author(obj: dict[str, Any], policy_drains: tuple[dict[str, Any], ...], asked: list[tuple[Access, ...]]) -> None:
    assert [need.any_of for need in authority.maintenance_needs(obj, "n1", policy_drains)] == asked


@pytest.mark.parametrize(("policy", "asked"), [
    pytest.param(nm_policy(), [], id="pacing alone asks nothing"),
    pytest.param(nm_policy(drain={"escalation": LADDER}), [ESCALATE], id="drain defaults that escalate ask to escalate"),
])
def test_what_a_policy_asks_of_its_author(policy: dict[str, Any], asked: list[tuple[Access, ...]]) -> None:
    assert [need.any_of for need in authority.policy_needs(policy)] == asked


def test_the_questions_are_the_attributes_of_a_subject_access_review() -> None:
    assert EVICT[0].attributes() == {"verb": "create", "resource": "pods", "subresource": "eviction"}
    assert PATCH_NODE[0].attributes() == {"verb": "patch", "resource": "nodes", "name": "n1"}


def test_a_refusal_names_the_field_the_user_the_rights_and_the_fix() -> None:
    need = authority.maintenance_needs(nm(drain={"escalation": LADDER}), "n1")[-1]
    assert need.refusal("alice") == (
        "spec.drain.escalation: user 'alice' may not escalate nodemaintenances.nodemaintenance.kubevirt.io nor delete pods in "
        "every namespace; remove spec.drain.escalation, or ask an admin to bind the node-maintenance-escalator ClusterRole")
    assert str(PATCH_NODE[0]) == "patch nodes/n1" and str(EVICT[0]) == "create pods/eviction in every namespace"


@pytest.mark.parametrize(("old", "asks"), [
    pytest.param(None, True, id="a new object"),
    pytest.param(nm(), False, id="metadata alone changed"),
    pytest.param(nm(drain={"escalation": LADDER}), True, id="the spec changed"),
])
def test_only_a_new_object_or_a_changed_spec_asks(old: dict[str, Any] | None, asks: bool) -> None:
    assert authority.changed(nm(finalizers=["x"]), old) is asks
