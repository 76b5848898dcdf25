"""No step raises: an exception the operator did not foresee is a broken promise, although the loop that meets it
logs it and tries again (a drain's step, the deletion handler, the policies' status writer): the same state raises
the same way at every try, so whatever that step was to do never happens while the state lasts; a decision shared by
every policy that raises stops every maintenance at once. The API's errors are foreseen (``client.errors.KubeError``):
what the operator does about them is what the other promises judge.

The loops say such an exception by logging it with its traceback; :class:`Raised` collects each from the log.
"""

from __future__ import annotations

import logging
import traceback

from node_maintenance.client.errors import KubeError


class Raised(logging.Handler):
    """The unforeseen exceptions logged since :meth:`taken` was last called, each as a violation's words."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self._found: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        if error is None or isinstance(error, KubeError):
            return
        frame = traceback.extract_tb(error.__traceback__)[-1] if error.__traceback__ else None
        where = f" (in {frame.name}, {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno})" if frame else ""
        self._found.append(f"no step raises: {record.getMessage()}: {type(error).__name__}: {error}{where}")

    def taken(self) -> list[str]:
        found, self._found = self._found, []
        return found
