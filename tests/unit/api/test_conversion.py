"""Conversion between v1alpha1, v1alpha3 and v1beta1 loses nothing, and refuses malformed input by name."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node_maintenance.api import conversion
from node_maintenance.api.conversion import IMPLICIT_NODE_NAME, PARKED, ConversionError, convert
from tests.unit.builders import nm

GROUP = "nodemaintenance.kubevirt.io"
VERSIONS = ("v1alpha1", "v1alpha3", "v1beta1")

names = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)
text = st.text(max_size=40)
small = st.integers(min_value=0, max_value=10_000)
labels = st.dictionaries(st.from_regex(r"[a-z]{1,8}", fullmatch=True), st.from_regex(r"[a-z0-9]{0,8}", fullmatch=True), max_size=3)
selector = st.fixed_dictionaries(
    {},
    optional={
        "matchLabels": labels,
        "matchExpressions": st.lists(
            st.fixed_dictionaries({"key": names, "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"])}, optional={"values": st.lists(names, max_size=2)}),
            max_size=2,
        ),
    },
)
drain = st.fixed_dictionaries({}, optional={"podSelector": selector, "gracePeriodSeconds": small, "timeoutSeconds": small})
condition = st.fixed_dictionaries(
    {"type": st.just("Drained"), "status": st.sampled_from(["True", "False"]), "reason": st.from_regex(r"[A-Z][A-Za-z]{0,10}", fullmatch=True), "message": text, "lastTransitionTime": st.just("2026-01-01T00:00:00Z")},
    optional={"observedGeneration": small},
)
old_status = {"phase": st.sampled_from(["Running", "Succeeded", "Failed"]), "lastError": text, "pendingPods": st.lists(names, max_size=3), "totalpods": small, "evictionPods": small}
new_status = {
    **old_status,
    "drainProgress": st.integers(0, 100),
    "lastUpdate": st.just("2026-01-01T00:00:00Z"),
    "pendingPodsRefs": st.lists(st.fixed_dictionaries({"namespace": names, "name": names}), max_size=2),
    "conditions": st.lists(condition, max_size=1),
}
foreign_annotations = st.dictionaries(st.from_regex(r"example\.com/[a-z]{1,6}", fullmatch=True), text, max_size=2)


@st.composite
def objects(draw: st.DrawFn, version: str) -> dict[str, Any]:
    spec_fields: dict[str, st.SearchStrategy[Any]] = {"reason": text}
    required = {}
    if version == "v1beta1":
        required["nodeName"] = names
        spec_fields["drain"] = drain
    elif version == "v1alpha1":
        required["nodeName"] = names
    else:
        spec_fields["nodeName"] = names
    metadata = {"name": draw(names), "uid": "u-1", "resourceVersion": "7", "labels": draw(labels)}
    if annotations := draw(foreign_annotations):
        metadata["annotations"] = annotations
    obj = {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "NodeMaintenance",
        "metadata": metadata,
        "spec": draw(st.fixed_dictionaries(dict(required), optional=spec_fields)),
    }
    if draw(st.booleans()):
        obj["status"] = draw(st.fixed_dictionaries({}, optional=new_status if version == "v1beta1" else old_status))
    return obj


@pytest.mark.parametrize("source, target", list(itertools.permutations(VERSIONS, 2)))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_there_and_back_is_the_identity(source: str, target: str, data: st.DataObject) -> None:
    original = data.draw(objects(source))
    there = convert(original, f"{GROUP}/{target}")
    assert there["apiVersion"] == f"{GROUP}/{target}"
    assert convert(there, f"{GROUP}/{source}") == original


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_any_path_through_all_versions_returns_the_original(data: st.DataObject) -> None:
    path = data.draw(st.permutations(VERSIONS))
    original = data.draw(objects(path[0]))
    current = original
    for version in (*path[1:], path[0]):
        current = convert(current, f"{GROUP}/{version}")
    assert current == original


@settings(max_examples=60, deadline=None)
@given(data=st.data(), target=st.sampled_from(VERSIONS))
def test_only_api_version_spec_status_and_our_annotations_change(data: st.DataObject, target: str) -> None:
    original = data.draw(objects(data.draw(st.sampled_from(VERSIONS))))
    converted = convert(original, f"{GROUP}/{target}")
    def strip(o: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in o.items() if k not in ("apiVersion", "spec", "status", "metadata")}

    assert strip(converted) == strip(original)

    def ours(m: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in (m.get("annotations") or {}).items() if not k.startswith("conversion.")}

    assert ours(converted["metadata"]) == ours(original["metadata"])
    assert {k: v for k, v in converted["metadata"].items() if k != "annotations"} == {k: v for k, v in original["metadata"].items() if k != "annotations"}


def test_v1alpha3_node_name_defaults_to_the_object_name() -> None:
    old = nm("node02", None, version="v1alpha3", reason="r")
    new = convert(old, f"{GROUP}/v1beta1")
    assert new["spec"] == {"reason": "r", "nodeName": "node02"}
    explicit = {**old, "spec": {"reason": "r", "nodeName": "node07"}}
    assert convert(explicit, f"{GROUP}/v1beta1")["spec"]["nodeName"] == "node07"
    assert IMPLICIT_NODE_NAME not in (convert(explicit, f"{GROUP}/v1beta1")["metadata"].get("annotations") or {})


def test_old_client_edit_keeps_drain_and_leaves_no_annotation() -> None:
    beta = nm("m", "n1", version="v1beta1", reason="a", drain={"timeoutSeconds": 30, "podSelector": {"matchLabels": {"x": "y"}}})
    alpha = convert(beta, f"{GROUP}/v1alpha1")
    assert "drain" not in alpha["spec"] and json.loads(alpha["metadata"]["annotations"][PARKED]) == {"spec": {"drain": beta["spec"]["drain"]}}
    alpha["spec"]["reason"] = "edited"
    back = convert(alpha, f"{GROUP}/v1beta1")
    assert back["spec"] == {**beta["spec"], "reason": "edited"}
    assert "annotations" not in back["metadata"]


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda o: o.update(apiVersion="other.io/v1beta1"), "apiVersion"),
        (lambda o: o.update(apiVersion=f"{GROUP}/v2"), "apiVersion"),
        (lambda o: o.update(kind="Node"), "kind"),
        (lambda o: o.update(spec="nope"), "spec"),
        (lambda o: o["metadata"].update(annotations=["x"]), "metadata.annotations"),
    ],
)
def test_malformed_objects_are_refused_naming_the_field(mutate: Callable[[dict[str, Any]], object], field: str) -> None:
    obj = nm("m", "n", version="v1alpha1")
    mutate(obj)
    with pytest.raises(ConversionError, match=field.replace(".", r"\.").replace("/", "/")):
        convert(obj, f"{GROUP}/v1beta1")


def _parking(obj: dict[str, Any], parked: str) -> dict[str, Any]:
    obj["metadata"]["annotations"] = {PARKED: parked}
    return obj


# Written through v1alpha1: the annotation claims another node, a drain the schema refuses and a status the operator never wrote.
FORGED = json.dumps({"spec": {"nodeName": "master-0", "drain": {"escalation": [{"afterSeconds": 0, "action": "DeletePods"}]}},
                     "status": {"phase": "Succeeded"}})


def test_parked_fields_never_override_what_the_source_version_holds() -> None:
    alpha = _parking(nm("m", "worker-1", version="v1alpha1", status={"phase": "Running"}), FORGED)
    beta = convert(alpha, f"{GROUP}/v1beta1")
    assert beta["spec"] == {"nodeName": "worker-1"}
    assert beta["status"] == {"phase": "Running"}
    assert "annotations" not in beta["metadata"]


def test_each_dropped_parked_field_is_reported_by_name() -> None:
    alpha = _parking(nm("m", "worker-1", version="v1alpha1", status={"phase": "Running"}), FORGED)
    result = conversion.converted(alpha, f"{GROUP}/v1beta1")
    assert result.obj["spec"] == {"nodeName": "worker-1"}
    assert len(result.dropped) == 3, result.dropped
    node_name, drain, phase = result.dropped
    assert "spec.nodeName" in node_name and "v1alpha1 has this field" in node_name
    assert "spec.drain.escalation[0].afterSeconds is 0, less than 1" in drain
    assert "status.phase" in phase


def test_parked_fields_that_fit_the_hub_are_restored() -> None:
    drain = {"timeoutSeconds": 30, "escalation": [{"afterSeconds": 60, "action": "DeletePods"}]}
    parked = json.dumps({"spec": {"drain": drain}, "status": {"drainProgress": 40, "lastUpdate": "2026-01-01T00:00:00Z"}})
    alpha = _parking(nm("m", "n1", version="v1alpha1", status={"phase": "Running"}), parked)
    beta = convert(alpha, f"{GROUP}/v1beta1")
    assert beta["spec"] == {"nodeName": "n1", "drain": drain}
    assert beta["status"] == {"phase": "Running", "drainProgress": 40, "lastUpdate": "2026-01-01T00:00:00Z"}
    assert conversion.converted(alpha, f"{GROUP}/v1beta1").dropped == ()


@pytest.mark.parametrize(
    "parked, field",
    [
        ("{not json", "not JSON"),
        pytest.param("[" * 100_000 + "]" * 100_000, "not JSON", id="nested-too-deeply"),
        ("[1, 2]", "not a JSON object"),
        ('{"spec": 3}', "spec"),
        ('{"spec": {"drain": {"timeoutSeconds": "30"}}}', "spec.drain.timeoutSeconds is a string, not an integer"),
        ('{"spec": {"drain": {"podSelector": {"matchLabels": {"a": 1}}}}}', "spec.drain.podSelector.matchLabels.a"),
        ('{"status": {"drainProgress": 101}}', "status.drainProgress is 101, more than 100"),
        ('{"status": {"lastUpdate": "yesterday"}}', "status.lastUpdate"),
        ('{"spec": {"drain": {"unknown": true}}}', "spec.drain.unknown is not a field"),
        ('{"spec": {"shell": "rm"}}', "spec.shell"),
        ('{"status": {"pendingPodsRefs": [{"namespace": "ns"}]}}', "status.pendingPodsRefs[0] lacks name"),
        (json.dumps({"status": {"conditions": [{"type": "Drained", "status": "True", "reason": "Done\n", "message": "",
                                                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}), "status.conditions[0].reason"),
    ],
)
def test_malformed_parked_data_is_dropped_and_the_object_converted(parked: str, field: str) -> None:
    alpha = _parking(nm("m", "n1", version="v1alpha1", reason="r"), parked)
    beta = convert(alpha, f"{GROUP}/v1beta1")
    assert beta["spec"] == {"nodeName": "n1", "reason": "r"}
    assert "annotations" not in beta["metadata"]
    result = conversion.converted(alpha, f"{GROUP}/v1beta1")
    assert result.obj == beta and len(result.dropped) == 1 and field in result.dropped[0] and PARKED in result.dropped[0], result.dropped


def test_a_v1beta1_object_with_a_malformed_parked_annotation_still_converts() -> None:
    beta = _parking(nm("m", "n1", version="v1beta1", drain={"timeoutSeconds": 5}), "{not json")
    assert convert(beta, f"{GROUP}/v1beta1") == beta  # to its own version: untouched
    alpha = convert(beta, f"{GROUP}/v1alpha1")
    assert json.loads(alpha["metadata"]["annotations"][PARKED]) == {"spec": {"drain": {"timeoutSeconds": 5}}}
    dropped = conversion.converted(beta, f"{GROUP}/v1alpha1").dropped
    assert len(dropped) == 1 and "not JSON" in dropped[0]


def test_the_implicit_node_name_annotation_cannot_hide_another_node() -> None:
    beta = nm("master-0", "worker-1", version="v1beta1")
    beta["metadata"]["annotations"] = {IMPLICIT_NODE_NAME: "true"}
    assert convert(beta, f"{GROUP}/v1alpha3")["spec"]["nodeName"] == "worker-1"
