"""Exit codes a script can rely on, and the one error type that carries them."""

from __future__ import annotations

import enum


class Exit(enum.IntEnum):
    OK = 0
    CLUSTER = 1  # the cluster could not be reached, refused the request, or failed
    USAGE = 2  # the command line is wrong
    NOT_FOUND = 3  # the node, the NodeMaintenance or the API itself does not exist
    NOT_DRAINED = 4  # the maintenance Failed, a wait timed out, or plan finds a block only an admin can lift
    CONFLICT = 5  # the node is already in maintenance


class CliError(Exception):
    """A failure to report on stderr: ``message`` names the object and the fix."""

    def __init__(self, code: Exit, message: str) -> None:
        super().__init__(message)
        self.code = code
