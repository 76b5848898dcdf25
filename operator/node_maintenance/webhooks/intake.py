"""How the webhook server takes a review's body in, so that no client can make it hold more than a bounded
amount of memory or wait forever: any pod of the cluster can reach the webhooks' port.

A body over MAX_REVIEW_BYTES is refused (413) as soon as its Content-Length says so, else once the bytes read pass
the limit; a body not read whole within READ_SECONDS is refused (408). At most READING_AT_ONCE bodies are read at
once (a slow client holds one place while it trickles, and little memory; past that the answer is 503 at once). A
body read whole then waits for one of REVIEWS_AT_ONCE turns to be worked on (the work is in a thread: a review of many
objects keeps a core busy for a while), at most WAITING_AT_MOST of them, each READ_SECONDS at most; past that, 503.
So a client that trickles its body never holds a turn that a review ready to be worked on needs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from aiohttp import web

# A list of NodeMaintenances is converted in chunks (kubectl asks for 500 objects at a time), each well under this.
MAX_REVIEW_BYTES = 3 * 1024 * 1024
# The API server waits 10 s for a webhook by default: a body that takes longer to come is of no use.
READ_SECONDS = 10.0
READING_AT_ONCE = 64
REVIEWS_AT_ONCE = 4
WAITING_AT_MOST = 16


class Intake:
    """Turns and reads for the reviews of one server."""

    def __init__(self) -> None:
        self._turns = asyncio.Semaphore(REVIEWS_AT_ONCE)
        self._waiting = 0
        self._reading = 0

    @contextlib.asynccontextmanager
    async def body(self, request: web.Request) -> AsyncIterator[bytes]:
        """The request's body, read within the limits; the block that works on it holds one of the turns."""
        if request.content_length is not None and request.content_length > MAX_REVIEW_BYTES:
            raise _too_large()
        if self._reading >= READING_AT_ONCE:
            raise _busy()
        self._reading += 1
        try:
            body = await _read(request)
        finally:
            self._reading -= 1
        await self._turn()
        try:
            yield body
        finally:
            self._turns.release()

    async def _turn(self) -> None:
        if self._turns.locked() and self._waiting >= WAITING_AT_MOST:
            raise _busy()
        self._waiting += 1
        try:
            async with asyncio.timeout(READ_SECONDS):
                await self._turns.acquire()
        except TimeoutError:
            raise _busy() from None
        finally:
            self._waiting -= 1


async def _read(request: web.Request) -> bytes:
    """The body as sent; the server's client_max_size stops a body that passes MAX_REVIEW_BYTES as it comes."""
    try:
        async with asyncio.timeout(READ_SECONDS):
            return await request.read()
    except TimeoutError:
        raise web.HTTPRequestTimeout(text=f"the request body did not come whole within {READ_SECONDS:g} s; "
                                          "send the review at once") from None
    except web.HTTPRequestEntityTooLarge:
        raise _too_large() from None
    except web.RequestPayloadError as error:  # a broken Content-Encoding: the client's error
        raise web.HTTPBadRequest(text=f"the request body could not be read ({error.__cause__ or error}); "
                                      "send the review as JSON, without a Content-Encoding or with a valid one") from None


def _too_large() -> web.HTTPRequestEntityTooLarge:
    return web.HTTPRequestEntityTooLarge(MAX_REVIEW_BYTES, 0, text=f"the request body is larger than {MAX_REVIEW_BYTES} "
                                                                   "bytes, the most a review may have; send fewer objects at once")


def _busy() -> web.HTTPServiceUnavailable:
    return web.HTTPServiceUnavailable(text="too many reviews at once; try again",
                                      headers={"Retry-After": "1"})
