"""Which pods a drain evicts, deletes or leaves, as `kubectl drain --ignore-daemonsets --delete-emptydir-data --force`."""

from __future__ import annotations

from functools import partial

import pytest

from node_maintenance.api.objects import key_of
from node_maintenance.drain import budgets
from node_maintenance.drain.pods import Action, classify, matches_selector, must_go, slim
from tests.unit import builders

# Pod p as the pod watch shows it before it is slimmed: no controller unless given, no Ready condition.
pod = partial(builders.pod, "p", uid="1", labels={}, annotations={}, owner=None, volumes=[], ready=None)


@pytest.mark.parametrize(
    "subject, action",
    [
        (pod(owner="DaemonSet"), Action.KEEP_DAEMONSET),
        (pod(annotations={"kubernetes.io/config.mirror": "x"}), Action.KEEP_MIRROR),
        (pod(owner="Job", phase="Succeeded"), Action.DELETE_FINISHED),
        (pod(phase="Failed"), Action.DELETE_FINISHED),
        (pod(volumes=[{"name": "tmp", "emptyDir": {}}]), Action.EVICT),
        (pod(), Action.EVICT),
        (pod(owner="ReplicaSet"), Action.EVICT),
        (pod(owner="StatefulSet"), Action.EVICT),
        (pod(owner="Job"), Action.EVICT),
    ],
)
def test_classification_follows_kubectl_drain(subject: dict, action: Action) -> None:
    assert classify(subject) is action


def test_a_finished_daemonset_pod_is_still_left_alone() -> None:
    assert classify(pod(owner="DaemonSet", phase="Failed")) is Action.KEEP_DAEMONSET


def test_owner_without_controller_flag_is_no_controller() -> None:
    subject = pod()
    subject["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "o"}]
    assert classify(subject) is Action.EVICT


def test_pods_outside_the_selector_are_neither_evicted_nor_waited_on() -> None:
    selector = {"matchLabels": {"tier": "web"}}
    assert classify(pod(labels={"tier": "db"}), selector) is Action.KEEP_UNSELECTED
    assert not must_go(pod(labels={"tier": "db"}), selector)
    assert must_go(pod(labels={"tier": "web"}), selector)


@pytest.mark.parametrize(
    "expression, labels, matches",
    [
        ({"key": "a", "operator": "In", "values": ["1", "2"]}, {"a": "2"}, True),
        ({"key": "a", "operator": "In", "values": ["1"]}, {}, False),
        ({"key": "a", "operator": "NotIn", "values": ["1"]}, {"a": "1"}, False),
        ({"key": "a", "operator": "NotIn", "values": ["1"]}, {}, True),
        ({"key": "a", "operator": "Exists"}, {"a": ""}, True),
        ({"key": "a", "operator": "Exists"}, {}, False),
        ({"key": "a", "operator": "DoesNotExist"}, {"a": "x"}, False),
        ({"key": "a", "operator": "DoesNotExist"}, {}, True),
    ],
)
def test_match_expressions(expression: dict, labels: dict, matches: bool) -> None:
    assert matches_selector(labels, {"matchExpressions": [expression]}) is matches


def test_absent_or_empty_selector_matches_everything() -> None:
    assert matches_selector({"x": "y"}, None) and matches_selector({}, {})


def test_a_slimmed_pod_gets_every_decision_the_full_pod_gets() -> None:
    budget = builders.budget("b", generation=1, labels={"app": "a"}, observed=1, desired=1, healthy=2)
    full = [pod(owner="DaemonSet"), pod(annotations={"kubernetes.io/config.mirror": "x"}), pod(phase="Failed"), pod(phase="Pending"),
            pod(owner="ReplicaSet", labels={"app": "a"}, volumes=[{"name": "tmp", "emptyDir": {}}])]
    full[-1]["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    full[-1]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    full[-1]["metadata"]["managedFields"] = [{"manager": "kubelet"}]
    for subject in full:
        small = slim(subject)
        assert (classify(small), must_go(small), key_of(small)) == (classify(subject), must_go(subject), key_of(subject))
        assert (budgets.covers(budget, small), budgets.ignores_budgets(small), budgets.bypasses(small, budget)) == (
            budgets.covers(budget, subject), budgets.ignores_budgets(subject), budgets.bypasses(subject, budget))
    assert "managedFields" not in slim(full[-1])["metadata"] and "volumes" not in slim(full[-1])["spec"]
