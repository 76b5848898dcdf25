"""Rendered files: write them under a root, or compare them with what is there and show a diff."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath


@dataclass(frozen=True)
class RenderedFile:
    """One output file: its path relative to the output root and its exact content."""

    path: PurePosixPath
    content: bytes

    @classmethod
    def text(cls, path: str, content: str) -> RenderedFile:
        return cls(PurePosixPath(path), content.encode("utf-8"))


@dataclass(frozen=True)
class Output:
    """What one render produced, and the directories it owns entirely (stray files there are stale)."""

    files: tuple[RenderedFile, ...]
    owned_dirs: tuple[PurePosixPath, ...] = ()

    def __add__(self, other: Output) -> Output:
        return Output(self.files + other.files, self.owned_dirs + other.owned_dirs)


def _stray(output: Output, root: Path) -> list[Path]:
    rendered = {root / f.path for f in output.files}
    stray: list[Path] = []
    for owned in output.owned_dirs:
        base = root / owned
        if base.is_dir():
            stray.extend(p for p in sorted(base.rglob("*")) if p.is_file() and p not in rendered)
    return stray


def write(output: Output, root: Path) -> list[Path]:
    """Write every file under ``root`` (only when its content changed) and delete stray files in owned dirs."""
    written: list[Path] = []
    for item in output.files:
        target = root / item.path
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file() or target.read_bytes() != item.content:
            target.write_bytes(item.content)
        written.append(target)
    for stray in _stray(output, root):
        stray.unlink()
    return written


def differences(output: Output, root: Path) -> list[str]:
    """A unified diff per file under ``root`` that differs from the render, plus stray files in owned dirs."""
    diffs: list[str] = []
    for item in output.files:
        target = root / item.path
        current = target.read_bytes() if target.is_file() else b""
        if current != item.content:
            diffs.append(_diff(str(item.path), current, item.content, exists=target.is_file()))
    for stray in _stray(output, root):
        diffs.append(f"{stray.relative_to(root)}: not rendered by nmo-pack any more; delete it (nmo-pack all does)\n")
    return diffs


def _diff(name: str, current: bytes, rendered: bytes, *, exists: bool) -> str:
    lines = difflib.unified_diff(
        _lines(current),
        _lines(rendered),
        fromfile=f"a/{name}" if exists else "/dev/null",
        tofile=f"b/{name}",
    )
    return "".join(lines) or f"{name}: differs in bytes not shown by a text diff\n"


def _lines(content: bytes) -> list[str]:
    text = content.decode("utf-8", errors="replace")
    return [line if line.endswith("\n") else line + "\n" for line in text.splitlines(keepends=True)]

