"""The operator-image cache keeps the newest layouts only: each source change adds one per release."""

from __future__ import annotations

import os
from pathlib import Path

from node_maintenance_packaging import operator_image
from node_maintenance_packaging.operator_image import KEPT_OPERATOR_IMAGES


def test_storing_a_layout_drops_the_oldest_beyond_the_limit(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    for age in range(KEPT_OPERATOR_IMAGES + 3):
        old = cache / f"operator-old{age:02d}"
        (old / "blobs").mkdir(parents=True)
        os.utime(old, (1000 - age, 1000 - age))  # old00 is the newest of them
    (cache / "python-base-1234").mkdir()
    built = tmp_path / "built"
    (built / "blobs").mkdir(parents=True)
    (built / "index.json").write_text("{}")

    operator_image.store(built, cache / "operator-new")

    operators = sorted(p.name for p in cache.glob("operator-*"))
    assert len(operators) == KEPT_OPERATOR_IMAGES
    assert "operator-new" in operators and (cache / "operator-new" / ".complete").exists()
    assert [f"operator-old{age:02d}" for age in range(KEPT_OPERATOR_IMAGES - 1)] == [n for n in operators if n != "operator-new"]
    assert (cache / "python-base-1234").exists(), "the base image is not an operator layout"
