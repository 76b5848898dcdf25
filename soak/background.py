"""A loop on a thread of its own while a ``with`` block runs: the soak's monitors and its supervisor."""

from __future__ import annotations

import threading
from typing import Self


class Background:
    """Starts ``_run`` on a daemon thread on ``__enter__``; on ``__exit__`` sets ``_stop``, which ``_run``
    must watch, and waits for the thread to end."""

    def __init__(self, name: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        raise NotImplementedError
