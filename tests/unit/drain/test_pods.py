"""Which pods a drain evicts, deletes or leaves, as `kubectl drain --ignore-daemonsets --delete-emptydir-data --force`."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from node_maintenance.api.objects import key_of
from node_maintenance.drain import budgets
from node_maintenance.drain.pods import Action, classify, daemonsets_to_read, matches_selector, must_go, slim
from tests.unit import builders

# Pod p as the pod watch shows it before it is slimmed: no controller unless given, no Ready condition.
pod = partial(builders.pod, "p", uid="1", labels={}, annotations={}, owner=None, volumes=[], ready=None)
DAEMONSET = "ns/o"  # the DaemonSet a pod(owner="DaemonSet") names
EXISTS, GONE = {DAEMONSET: True}, {DAEMONSET: False}


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
def test_classification_follows_kubectl_drain(subject: dict[str, Any], action: Action) -> None:
    assert classify(subject, daemonsets=EXISTS) is action


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
@pytest.mark.parametrize("daemonsets", [EXISTS, GONE, {}], ids=["exists", "gone", "unknown"])
def test_a_finished_daemonset_pod_is_deleted_whatever_is_known_of_its_daemonset(phase: str, daemonsets: dict[str, bool]) -> None:
    """kubectl drain's daemonSetFilter: "Any finished pod can be removed", before it reads the DaemonSet."""
    subject = pod(owner="DaemonSet", phase=phase)
    assert classify(subject, daemonsets=daemonsets) is Action.DELETE_FINISHED and must_go(subject, daemonsets=daemonsets)


def test_a_daemonset_pod_whose_daemonset_is_gone_is_evicted() -> None:
    """kubectl drain --force removes a DaemonSet pod whose DaemonSet is not found."""
    assert classify(pod(owner="DaemonSet"), daemonsets=GONE) is Action.EVICT
    assert must_go(pod(owner="DaemonSet"), daemonsets=GONE)


def test_a_daemonset_pod_whose_daemonset_exists_stays() -> None:
    assert classify(pod(owner="DaemonSet"), daemonsets=EXISTS) is Action.KEEP_DAEMONSET
    assert not must_go(pod(owner="DaemonSet"), daemonsets=EXISTS)


@pytest.mark.parametrize("daemonsets", [None, {}, {"ns/other": False}, {"elsewhere/o": False}])
def test_a_daemonset_pod_whose_daemonset_is_unknown_stays(daemonsets: dict[str, bool] | None) -> None:
    """When in doubt, hold: a DaemonSet not read (or the read failed) may be gone, but its pod is not evicted on a guess."""
    assert classify(pod(owner="DaemonSet"), daemonsets=daemonsets) is Action.KEEP_UNKNOWN_DAEMONSET
    assert not must_go(pod(owner="DaemonSet"), daemonsets=daemonsets)


def test_a_controller_named_daemonset_of_another_api_is_no_daemonset() -> None:
    """As kubectl drain: kind DaemonSet of another group (OpenKruise's, say) is a controller like any other."""
    subject = pod(owners=[{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "DaemonSet", "name": "o", "controller": True}])
    assert classify(subject, daemonsets=EXISTS) is Action.EVICT and daemonsets_to_read([subject]) == set()


def test_the_daemonsets_read_are_those_of_unfinished_daemonset_pods() -> None:
    node_pods = [pod(owner="DaemonSet", owner_name="a"), pod(owner="DaemonSet", owner_name="a", uid="2"),
                 pod(owner="DaemonSet", owner_name="b", namespace="other"), pod(owner="DaemonSet", owner_name="done", phase="Succeeded"),
                 pod(owner="ReplicaSet"), pod()]
    assert daemonsets_to_read(node_pods) == {"ns/a", "other/b"}


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
def test_match_expressions(expression: dict[str, Any], labels: dict[str, Any], matches: bool) -> None:
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
        assert (daemonsets_to_read([small]), classify(small, daemonsets=GONE)) == (daemonsets_to_read([subject]), classify(subject, daemonsets=GONE))
        assert (budgets.covers(budget, small), budgets.ignores_budgets(small), budgets.bypasses(small, budget)) == (
            budgets.covers(budget, subject), budgets.ignores_budgets(subject), budgets.bypasses(subject, budget))
    assert "managedFields" not in slim(full[-1])["metadata"] and "volumes" not in slim(full[-1])["spec"]
