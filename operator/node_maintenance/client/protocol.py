"""What the runtime and the webhooks ask of the API access, as Protocols: the code that makes requests names
these instead of ``AsyncKube`` (:mod:`node_maintenance.client.async_http`) and ``Kube`` (:mod:`node_maintenance.client.http`), so that anything answering
the same calls, the unit tests' in-memory API above all, stands in for them and is type-checked as they are."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from node_maintenance.client.credentials import Credentials


class KubeApi(Protocol):
    """Requests and watches on the event loop (``AsyncKube``): the drain engine, its executor, the policies,
    the shared watches and the kopf handlers."""

    @property
    def credentials(self) -> Credentials:
        """Where the server is and who asks: kopf's own session is made from them."""

    @property
    def may_write(self) -> Callable[[], bool]:
        """False once this replica no longer leads: kopf's session refuses its writes then too."""

    async def request(self, method: str, path: str, *, query: dict[str, str] | None = ..., body: Any = ...,
                      content_type: str = ..., timeout: float = ...) -> dict[str, Any]:
        """The decoded answer; a failure raises the typed errors of :mod:`node_maintenance.client.errors`."""

    async def get(self, path: str) -> dict[str, Any] | None:
        """GET, with None for a missing object."""

    async def patch(self, path: str, body: dict[str, Any], content_type: str = ...) -> dict[str, Any]:
        """PATCH, a merge patch unless ``content_type`` says otherwise."""

    def watch(self, path: str, query: dict[str, str], on_open: Callable[[], None] | None = ...) -> AsyncIterator[dict[str, Any]]:
        """The events of one watch request; ``on_open`` is called once the server has accepted it."""


class BlockingKubeApi(Protocol):
    """Blocking requests, made from a thread (``Kube``): leader election, admission and the storage migration."""

    def request(self, method: str, path: str, *, query: dict[str, str] | None = ..., body: Any = ...,
                content_type: str = ..., timeout: float = ...) -> dict[str, Any]:
        """The decoded answer; a failure raises the typed errors of :mod:`node_maintenance.client.errors`."""

    def get(self, path: str, **query: str) -> dict[str, Any] | None:
        """GET, with None for a missing object."""

    def patch(self, path: str, body: dict[str, Any], content_type: str = ...) -> dict[str, Any]:
        """PATCH, a merge patch unless ``content_type`` says otherwise."""
