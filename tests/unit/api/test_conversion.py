"""Conversion between v1alpha1, v1alpha3 and v1beta1 loses nothing, and refuses malformed input by name."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    {"type": st.just("Drained"), "status": st.sampled_from(["True", "False"]), "reason": names, "message": text, "lastTransitionTime": st.just("2026-01-01T00:00:00Z")},
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
        (lambda o: o["metadata"].update(annotations={PARKED: "{not json"}), PARKED),
        (lambda o: o["metadata"].update(annotations=["x"]), "metadata.annotations"),
    ],
)
def test_malformed_objects_are_refused_naming_the_field(mutate: Callable[[dict[str, Any]], object], field: str) -> None:
    obj = nm("m", "n", version="v1alpha1")
    mutate(obj)
    with pytest.raises(ConversionError, match=field.replace(".", r"\.").replace("/", "/")):
        convert(obj, f"{GROUP}/v1beta1")
