"""The one error type the packaging tool reports to its user instead of a traceback."""

from __future__ import annotations


class PackagingError(Exception):
    """A problem in the inputs, worded so the user can fix it: what is wrong, where, and how to fix it."""


def release_error(version: str, field: str, problem: str, fix: str) -> PackagingError:
    """An error about one field of one release in releases.yaml."""
    return PackagingError(f"release {version}: {field}: {problem}; {fix}")
