"""Log lines are JSON with the objects they concern."""

from __future__ import annotations

import json
import logging

from node_maintenance.runtime.logs import JsonFormatter


def test_log_lines_are_json_with_our_context() -> None:
    record = logging.LogRecord("node_maintenance", logging.INFO, __file__, 1, "node drained", (), None)
    record.nodeMaintenance, record.node, record.settings = "nm-1", "n1", object()
    line = JsonFormatter().format(record)
    entry = json.loads(line)
    assert entry["msg"] == "node drained" and entry["nodeMaintenance"] == "nm-1" and entry["node"] == "n1"
    assert "settings" not in entry and entry["level"] == "info" and entry["time"].endswith("Z")
