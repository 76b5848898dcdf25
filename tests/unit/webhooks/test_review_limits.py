"""The webhook server holds no more than it must, whoever posts: a body over the limit is refused before it is read
whole, a body too slow to come is refused at its deadline, reviews are decoded and decided off the event loop, and
past the reviews worked on and waiting at once, the next is refused at once."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from node_maintenance.webhooks import intake, server
from tests.unit.builders import nm, nm_policy, unreachable_api
from tests.unit.serving import post, webhooks_served

GROUP = "nodemaintenance.kubevirt.io"
LIMIT = 3 * 1024 * 1024


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, ssl.SSLContext]]:
    with webhooks_served(tmp_path_factory.mktemp("certs"), unreachable_api()) as port_and_context:
        yield port_and_context


def _status_after(served: tuple[int, ssl.SSLContext], head: bytes, parts: Iterable[bytes] = ()) -> tuple[int, bytes]:
    """Send a request's head and ``parts`` of its body, no more, and read the answer's status line: the server
    must answer without the rest."""
    port, context = served
    with socket.create_connection(("127.0.0.1", port), timeout=10) as plain, context.wrap_socket(plain, server_hostname="127.0.0.1") as tls:
        tls.sendall(head)
        for part in parts:
            tls.sendall(part)
        answer = b""
        while b"\r\n\r\n" not in answer:
            received = tls.recv(65536)
            if not received:
                break
            answer += received
    return int(answer.split(b" ", 2)[1]), answer


def _head(path: str, **headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json",
             *(f"{name.replace('_', '-')}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _conversion(objects: int) -> bytes:
    return json.dumps({"request": {"uid": "big", "desiredAPIVersion": f"{GROUP}/v1alpha1",
                                   "objects": [nm(f"m{i}", f"n{i}", version="v1beta1", drain={"timeoutSeconds": i}) for i in range(objects)]}}).encode()


def test_a_body_whose_length_is_over_the_limit_is_refused_before_a_byte_of_it_is_read(served: tuple[int, ssl.SSLContext]) -> None:
    status, answer = _status_after(served, _head("/convert", Content_Length=str(LIMIT + 1)))
    assert status == 413, answer


def test_a_body_of_unsaid_length_is_refused_once_it_passes_the_limit(served: tuple[int, ssl.SSLContext]) -> None:
    chunk = b"[" + b" " * (64 * 1024 - 2) + b"]"
    parts = [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * (LIMIT // len(chunk) + 2)  # past the limit, and never ended
    status, answer = _status_after(served, _head("/convert", Transfer_Encoding="chunked"), parts)
    assert status == 413, answer


def test_a_body_that_does_not_come_whole_in_time_is_refused(served: tuple[int, ssl.SSLContext], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(intake, "READ_SECONDS", 0.5)
    status, answer = _status_after(served, _head("/convert", Content_Length="100"), [b'{"request": '])
    assert status == 408 and b"within 0.5 s" in answer, answer


def _blocking(monkeypatch: pytest.MonkeyPatch) -> tuple[list[bool], threading.Semaphore, threading.Event]:
    """Make every conversion wait for the returned event once it has begun: whether each ran on an event loop, and
    a semaphore released once per conversion begun."""
    on_loop: list[bool] = []
    begun, go_on = threading.Semaphore(0), threading.Event()
    convert: Callable[[Any], server.ConversionReply] = server.conversion_reply

    def waiting(review: Any) -> server.ConversionReply:
        try:
            on_loop.append(asyncio.get_running_loop() is not None)
        except RuntimeError:  # no loop runs in this thread
            on_loop.append(False)
        begun.release()
        go_on.wait(30)
        return convert(review)

    monkeypatch.setattr(server, "conversion_reply", waiting)
    return on_loop, begun, go_on


def test_a_review_is_decoded_and_converted_off_the_event_loop(served: tuple[int, ssl.SSLContext], monkeypatch: pytest.MonkeyPatch) -> None:
    on_loop, begun, go_on = _blocking(monkeypatch)
    cheap = json.dumps({"request": {"uid": "cheap", "operation": "CREATE", "object": nm_policy("p")}}).encode()
    with ThreadPoolExecutor(1) as pool:
        big = pool.submit(post, served, "/convert", _conversion(2000))
        try:
            assert begun.acquire(timeout=10), "the conversion never began"
            # The conversion holds its thread: a loop it ran on could answer nothing meanwhile.
            status, answer = post(served, "/validate-nodemaintenancepolicy", cheap)
            assert status == 200 and json.loads(answer) == server.admission_response("cheap", None), (status, answer)
        finally:
            go_on.set()
        status, answer = big.result(30)
    assert status == 200, (status, answer)
    converted = json.loads(answer)["response"]
    assert converted["result"] == {"status": "Success"} and len(converted["convertedObjects"]) == 2000
    assert on_loop == [False]


def test_past_the_reviews_worked_on_and_waiting_the_next_is_refused_at_once(served: tuple[int, ssl.SSLContext], monkeypatch: pytest.MonkeyPatch) -> None:
    _, begun, go_on = _blocking(monkeypatch)
    monkeypatch.setattr(intake, "WAITING_AT_MOST", 0)
    with ThreadPoolExecutor(intake.REVIEWS_AT_ONCE) as pool:
        held = [pool.submit(post, served, "/convert", _conversion(1)) for _ in range(intake.REVIEWS_AT_ONCE)]
        try:
            for _ in held:
                assert begun.acquire(timeout=10), "a conversion never began"
            status, answer = post(served, "/convert", _conversion(1))
            assert status == 503 and "reviews at once; try again" in answer.decode(), (status, answer)
        finally:
            go_on.set()
        assert [future.result(30)[0] for future in held] == [200] * intake.REVIEWS_AT_ONCE


def test_clients_trickling_their_bodies_hold_no_turn_a_ready_review_needs(served: tuple[int, ssl.SSLContext]) -> None:
    """More clients than there are turns send a head and a few bytes of a body, and stop: a whole review sent
    meanwhile is answered, since only a body read whole waits for a turn."""
    port, context = served
    trickling = []
    try:
        for _ in range(intake.REVIEWS_AT_ONCE * 3):
            plain = socket.create_connection(("127.0.0.1", port), timeout=10)
            tls = context.wrap_socket(plain, server_hostname="127.0.0.1")
            tls.sendall(_head("/convert", Content_Length="100000") + b'{"request"')
            trickling.append(tls)
        status, answer = post(served, "/convert", _conversion(1))
        assert status == 200 and json.loads(answer)["response"]["result"]["status"] == "Success", (status, answer)
    finally:
        for connection in trickling:
            connection.close()
