"""What the operator logged about one NodeMaintenance: its log is one JSON object a line."""

from __future__ import annotations

import json

from devcluster.operator import OperatorProcess


def errors_about(operator: OperatorProcess, maintenance: str) -> list[str]:
    """The operator's log lines at level error about one NodeMaintenance (a failed step, an unhandled error)."""
    lines = (json.loads(line) for line in operator.logs().splitlines() if line.startswith("{"))
    return [f"{line['msg']}: {str(line.get('error', ''))[-600:]}" for line in lines
            if line.get("level") in ("error", "critical") and line.get("nodeMaintenance") == maintenance]
