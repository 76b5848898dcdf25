"""The bench counts requests from the API server's audit log, which the server sets aside at 100 MB."""

from __future__ import annotations

import json
import os
from pathlib import Path

from bench.cluster import AuditCounter


def line(user: str, verb: str) -> str:
    return json.dumps({"user": {"username": user}, "verb": verb, "stage": "ResponseComplete", "objectRef": {"resource": "pods"}}) + "\n"


def test_requests_since_the_mark_are_counted_across_a_new_log_file(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_text(line("op", "get"))
    counter = AuditCounter(log)
    counter.mark()
    with log.open("a") as handle:
        handle.write(line("op", "list"))
    # The server renames the full file beside it and starts a new one.
    log.rename(tmp_path / "audit-2026-11-24T10-00-00.000.log")
    os.utime(tmp_path / "audit-2026-11-24T10-00-00.000.log", (1, 1))
    log.write_text(line("op", "delete") + line("someone", "delete") + '{"user": {"usern')  # a line being written
    assert counter.since_mark("op") == {"list pods": 1, "delete pods": 1}
