"""Which `kubectl get` the harness answers in-process (``devcluster.reads.parse``), and what it reads: the shapes
the tests poll with, each read as kubectl reads it; any other shape is left to kubectl itself."""

from __future__ import annotations

from typing import Any

import pytest

from devcluster.reads import parse


@pytest.mark.parametrize(("args", "read"), [
    (("get", "node", "n1", "-o", "json"), {"resource": "node", "name": "n1", "output": "json"}),
    (("get", "pods", "-n", "app", "-l", "app=web", "-o", "json"),
     {"resource": "pods", "name": None, "namespace": "app", "label_selector": "app=web", "output": "json"}),
    (("get", "events", "-A", "--field-selector", "involvedObject.kind=Node", "-o", "json"),
     {"resource": "events", "name": None, "all_namespaces": True, "field_selector": "involvedObject.kind=Node", "output": "json"}),
    (("get", "nodemaintenances.v1alpha1.nodemaintenance.kubevirt.io", "m", "--namespace=x", "--output=json"),
     {"resource": "nodemaintenances.v1alpha1.nodemaintenance.kubevirt.io", "name": "m", "namespace": "x", "output": "json"}),
])
def test_a_get_as_json_is_read_here(args: tuple[str, ...], read: dict[str, Any]) -> None:
    assert parse(args) == read


@pytest.mark.parametrize("args", [
    ("get", "node", "n1"),  # a table
    ("get", "node", "n1", "-o", "jsonpath={.spec}"),
    ("get", "node", "n1", "n2", "-o", "json"),  # several names
    ("get", "node/n1", "-o", "json"),
    ("get", "pods,nodes", "-o", "json"),
    ("get", "--raw", "/api", "-o", "json"),
    ("get", "pods", "-w", "-o", "json"),
    ("get", "pods", "-o"),
    ("delete", "node", "n1", "-o", "json"),
])
def test_any_other_shape_is_left_to_kubectl(args: tuple[str, ...]) -> None:
    assert parse(args) is None
