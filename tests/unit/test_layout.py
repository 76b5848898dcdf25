"""The operator's code stays in small modules, as docs/architecture.md lays it out: one past 300 lines has grown a second
job, which goes to a module of its own whose name says it."""

from __future__ import annotations

from pathlib import Path

MAX_MODULE_LINES = 300
OPERATOR = Path(__file__).resolve().parents[2] / "operator"


def test_no_module_of_the_operator_is_over_300_lines() -> None:
    modules = sorted(OPERATOR.rglob("*.py"))
    over = {str(module.relative_to(OPERATOR)): lines for module in modules if (lines := len(module.read_text().splitlines())) > MAX_MODULE_LINES}
    assert len(modules) > 100, modules  # the tree was found
    assert over == {}, f"split these by job: {over}"
