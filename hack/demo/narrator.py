"""What the demo says: on screen with rich, and the same words as plain Markdown for the transcript.

The transcript is meant to be committed and diffed, so it holds no colour, no machine paths and no
host:port of the local registry (``hide`` swaps them for placeholders), and durations in it are rounded.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.status import Status

TRANSCRIPT_HEADER = """# `make demo`, as it ran

Written by the demo itself (`hack/demo`); `make demo-transcript` runs it again and rewrites this page.
Pod names, ages and durations vary from run to run; durations are rounded to {rounding} seconds here.
"""
ROUNDING = 5


def rounded(seconds: float) -> str:
    """A duration for the transcript: to the nearest ROUNDING seconds, so a rerun rarely changes it."""
    return f"~{max(ROUNDING, ROUNDING * round(seconds / ROUNDING))} s"


class Narrator:
    """Steps, sentences and commands with their output, printed now and kept for the transcript."""

    def __init__(self, screen: Console) -> None:
        self.screen = screen
        self._parts: list[str] = []
        self._hidden: list[tuple[str, str]] = []
        self._steps = 0

    def hide(self, text: str, placeholder: str) -> None:
        """Show ``placeholder`` instead of ``text`` (a machine path, a port) in the transcript."""
        if text:
            self._hidden.append((text, placeholder))

    def plain(self, text: str) -> str:
        for text_, placeholder in self._hidden:
            text = text.replace(text_, placeholder)
        return text

    def step(self, title: str) -> None:
        self._steps += 1
        self.screen.print(f"\n[bold cyan]==> {self._steps}. {escape(title)}", highlight=False)
        self._parts.append(f"## {self._steps}. {self.plain(title)}\n")

    def say(self, text: str, *, transcript: str | None = None) -> None:
        """A sentence; ``transcript`` words it for the transcript when the screen's has exact durations."""
        self.screen.print(escape(text), highlight=False, soft_wrap=True)
        self._parts.append(self.plain(transcript or text) + "\n")

    def say_took(self, template: str, seconds: float) -> None:
        """A sentence with a duration (``{}`` in ``template``): exact on screen, rounded in the transcript."""
        self.say(template.format(f"{seconds:.1f} s"), transcript=template.format(rounded(seconds)))

    def block(self, text: str, *, command: str | None = None) -> None:
        """A command line (as an admin would type it) and what it printed, or a plain block of text."""
        shown = text.rstrip("\n")
        if command:
            self.screen.print(f"[dim]$ {escape(command)}", highlight=False, soft_wrap=True)
        self.screen.print(escape(shown), highlight=False, soft_wrap=True)
        lines = ([f"$ {command}"] if command else []) + ([shown] if shown else [])
        self._parts.append("```text\n" + self.plain("\n".join(lines)) + "\n```\n")

    @contextlib.contextmanager
    def log(self) -> Iterator[Callable[[str, float], None]]:
        """Events told as they happen, after how long on screen; one block of the transcript, without times."""
        lines: list[str] = []

        def line(text: str, seconds: float) -> None:
            self.screen.print(f"[dim]{seconds:6.1f} s[/dim]  {escape(text)}", highlight=False, soft_wrap=True)
            lines.append(text)

        yield line
        if lines:
            self.record("```text\n" + "\n".join(lines) + "\n```")

    def waiting(self, text: str) -> Status:
        """A spinner on a terminal while something long runs."""
        return self.screen.status(escape(text))

    def record(self, text: str) -> None:
        """Transcript-only text (what the screen showed as a live view)."""
        self._parts.append(self.plain(text) + "\n")

    def transcript(self) -> str:
        return TRANSCRIPT_HEADER.format(rounding=ROUNDING) + "\n" + "\n".join(self._parts)

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.transcript())
