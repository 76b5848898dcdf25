"""The API layer's typed errors: callers never see an HTTP library's exception or a status code.

:class:`ApiError` and its subclasses are answers the server gave; :class:`Unreachable` is no answer at
all (refused, reset, dropped, timed out, a body cut short); :class:`ConfigError` is no credential to
send; :class:`NotLeading` is a write this replica may no longer send. All are :class:`KubeError`.
"""

from __future__ import annotations

import json
from typing import Any


class KubeError(Exception):
    """A request that did not succeed, for whatever reason."""


class ConfigError(KubeError):
    """No usable credentials: a kubeconfig, its exec plugin or the pod's ServiceAccount; the message
    names the file or entry, and the fix."""


class Unreachable(KubeError):
    """No answer from the API server: the connection was refused, reset, dropped or timed out, or the
    answer was cut short. Whether the request took effect is unknown."""


class Silent(Unreachable):
    """A watch the API server had accepted sent nothing, not even a bookmark, for a while: its connection may be gone,
    or the server had nothing to say (it sends no bookmark for a kind nobody has written since it started, such as
    Jobs in a cluster that never ran one). Nothing is lost: the watch resumes from the last version it saw."""


class NotLeading(KubeError):
    """A write refused before it was sent: this replica no longer leads (its Lease renewal failed), and
    another may take over at any moment."""


class ApiError(KubeError):
    """A request the API server answered with an error; the subclasses say which kind."""

    def __init__(self, status: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{reason or 'error'} ({status}): {message}" if message else f"{reason or 'error'} ({status})")
        self.status = status
        self.reason = reason
        self.message = message
        self.details = details or {}  # the Status object's details: the kind and name it is about, when it says


class NotFound(ApiError):
    """The object (or the resource) does not exist."""

    def names(self, kind: str, name: str) -> bool:
        """Whether the server said that this object is missing, not that its resource is not served (yet):
        an API server starting answers 404 to every path of a group it has not installed."""
        return self.details.get("kind") == kind and self.details.get("name") == name


class Conflict(ApiError):
    """A stale resourceVersion or a failed precondition: decide again on fresh state."""


class Gone(ApiError):
    """A watch's resourceVersion is too old: list again."""


class TooManyRequests(ApiError):
    """Refused for now; ``retry_after`` in seconds. ``by_budget``: a PodDisruptionBudget refused an eviction
    (the server names the cause); otherwise the server's own limits or an admission webhook did."""

    def __init__(self, status: int, reason: str, message: str, retry_after: float = 0.0, by_budget: bool = False) -> None:
        super().__init__(status, reason, message)
        self.retry_after = retry_after
        self.by_budget = by_budget


class Unauthorized(ApiError):
    """The credentials were refused (an expired token, a wrong certificate)."""


class Forbidden(ApiError):
    """RBAC refused the request."""


class Invalid(ApiError):
    """The request's body or parameters were refused as malformed."""


class ServerError(ApiError):
    """The server failed (5xx): the request may be tried again later."""


# The cause the Eviction API gives when a PodDisruptionBudget refuses (policy/v1 DisruptionBudgetCause).
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"

_KINDS: dict[int, type[ApiError]] = {400: Invalid, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 410: Gone, 412: Conflict, 422: Invalid}


def api_error(status: int, reason: str, body: str | dict[str, Any], retry_after: str | None = None) -> ApiError:
    """The typed error for an answer; ``body`` is the Status object the server sent (text or parsed)."""
    if isinstance(body, str):
        try:
            body = json.loads(body) if body else {}
        except ValueError:
            body = {"message": body}
    message = str(body.get("message", "")) if isinstance(body, dict) else ""
    if status == 429:
        try:
            seconds = float(retry_after) if retry_after else 0.0
        except ValueError:
            seconds = 0.0
        details = (body.get("details") if isinstance(body, dict) else None) or {}
        seconds = max(seconds, float(details.get("retryAfterSeconds") or 0))
        by_budget = any(cause.get("type") == DISRUPTION_BUDGET_CAUSE for cause in details.get("causes") or [])
        return TooManyRequests(status, reason, message, seconds, by_budget)
    details = body.get("details") if isinstance(body, dict) else None
    return _KINDS.get(status, ServerError if status >= 500 else ApiError)(status, reason, message, details if isinstance(details, dict) else None)
