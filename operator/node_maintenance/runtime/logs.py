"""Logs as one JSON object a line, carrying the NodeMaintenance and node they concern."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

_PLAIN = (str, int, float, bool, list)
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    converter = staticmethod(time.gmtime)  # the "Z" in the timestamp must be true

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        ref = getattr(record, "k8s_ref", None)  # kopf's per-object loggers
        if isinstance(ref, dict) and ref.get("name"):
            entry["nodeMaintenance"] = ref["name"]
        for key, value in vars(record).items():
            # Our own context (nodeMaintenance, node, pod, ...) is plain data; library internals are not logged.
            if key not in _STANDARD and not key.startswith("k8s_") and key not in entry and isinstance(value, _PLAIN):
                entry[key] = value
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(level: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
