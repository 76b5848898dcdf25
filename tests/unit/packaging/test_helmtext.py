"""A manifest with markers becomes Helm template text: each marker where its kind goes, everything else as the bundle
dumps it, and the object's own braces escaped so that Helm prints them as they are."""

from __future__ import annotations

import pytest

from node_maintenance_packaging import helmtext
from node_maintenance_packaging.helmtext import Block, Expr, Lines


def test_each_marker_is_put_where_its_kind_goes() -> None:
    text = helmtext.template({
        "metadata": {"name": "x", "namespace": Expr("{{ .Release.Namespace }}"),
                     "annotations": {"kept": "yes", Lines(("{{- if .Values.a }}", "a: on", "{{- end }}")): None}},
        "spec": {"replicas": Expr("{{ .Values.replicas }}"), "resources": Block(".Values.resources"),
                 "args": ["--one", Lines(("{{- if .Values.b }}", "- --two", "{{- end }}"))]},
    })
    assert text == (
        "metadata:\n"
        "  name: x\n"
        "  namespace: {{ .Release.Namespace }}\n"
        "  annotations:\n"
        "    kept: 'yes'\n"
        "    {{- if .Values.a }}\n"
        "    a: on\n"
        "    {{- end }}\n"
        "spec:\n"
        "  replicas: {{ .Values.replicas }}\n"
        "  resources:\n"
        "    {{- toYaml .Values.resources | nindent 4 }}\n"
        "  args:\n"
        "    - --one\n"
        "    {{- if .Values.b }}\n"
        "    - --two\n"
        "    {{- end }}\n"
    )


def test_the_objects_own_braces_are_escaped_and_documents_separated() -> None:
    text = helmtext.template({"summary": "Node {{ $labels.node }} drains"}, {"kind": "B"})
    assert text == 'summary: Node {{ "{{" }} $labels.node {{ "}}" }} drains\n---\nkind: B\n'


def test_a_block_where_only_an_inline_expression_fits_is_refused() -> None:
    with pytest.raises(ValueError, match="only an inline expression"):
        helmtext.template({"items": [Block(".Values.x")]})


def test_a_block_under_the_first_key_of_a_list_item_goes_under_that_item() -> None:
    text = helmtext.template({"containers": [{"resources": Block(".Values.resources"), "name": "manager"}]})
    assert text == ("containers:\n"
                    "  - resources:\n"
                    "      {{- toYaml .Values.resources | nindent 6 }}\n"
                    "    name: manager\n")
