"""Every refusal of a HEAD request, against a real ``rms serve`` on a raw kept-alive
connection: the answer has a head and no body, so the next request on the same connection reads
its own answer (a body would be read as the next answer)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from rms.config import Settings
from tests.conftest import ADMIN_TOKEN
from tests.integration.security.served import create_app_keys, rms_serve

TOO_LARGE = 1024 + 64 * 1024 + 1  # over RMS_MAX_PAYLOAD_BYTES and the request overhead
HEALTH = b"GET /healthz HTTP/1.1\r\nHost: rms\r\n\r\n"


@pytest.fixture
def serve(settings: Settings, tmp_path: Path) -> Iterator[int]:
    with rms_serve(settings, tmp_path / "serve.log", {
            "RMS_ADMISSION_ENABLED": "true", "RMS_ADMISSION_LIMIT": "1",
            "RMS_ADMISSION_MAX_LIMIT": "1",
            "RMS_APP_RATE_LIMIT_PER_SECOND": "0.001", "RMS_APP_RATE_LIMIT_BURST": "1",
            "RMS_HTTP_BODY_TIMEOUT_SECONDS": "2", "RMS_MAX_PAYLOAD_BYTES": "1024"}) as port:
        yield port


async def _answer_head(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)


async def _head_then_health(port: int, request: bytes) -> tuple[bytes, bytes]:
    """A HEAD request and then ``GET /healthz`` on one connection: the first answer's head,
    and what the connection says next (the health answer's status line, when the HEAD answer
    carried no body)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        head = await _answer_head(reader)
        if b"connection: close" in head.lower():
            return head, b""
        writer.write(HEALTH)
        following = await asyncio.wait_for(reader.readuntil(b"\r\n"), 10)
        return head, following
    finally:
        writer.close()


async def _hold_the_place(port: int, auth: bytes, stop: asyncio.Event) -> None:
    """An app's prepare whose body trickles in, holding the one place of the limit."""
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /v1/messages HTTP/1.1\r\nHost: rms\r\nContent-Type: application/json\r\n"
                 + auth + b"Content-Length: 100\r\n\r\n")
    while not stop.is_set():
        writer.write(b" ")
        await writer.drain()
        await asyncio.wait([asyncio.create_task(stop.wait())], timeout=0.5)
    writer.close()


async def _until_admitted(port: int, auth: bytes) -> None:
    """Wait until the held place is given back (the holder's connection closed)."""
    for _ in range(100):
        head, _ = await _head_then_health(
            port, b"HEAD /v1/messages/m-1 HTTP/1.1\r\nHost: rms\r\n" + auth + b"\r\n")
        if not head.startswith(b"HTTP/1.1 503 "):
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the held place was never given back")


@pytest.mark.timeout(120)
async def test_every_refusal_of_a_head_request_has_no_body(serve: int) -> None:
    key = create_app_keys(f"http://127.0.0.1:{serve}", ADMIN_TOKEN, "probe")["api_key"]
    auth = f"Authorization: Bearer {key}\r\n".encode()
    probes = {
        "404": b"HEAD /nope HTTP/1.1\r\nHost: rms\r\n\r\n",
        "405 (the prepare path)": b"HEAD /v1/messages HTTP/1.1\r\nHost: rms\r\n" + auth + b"\r\n",
        "405 (the confirm fast path)":
            b"HEAD /v1/messages/m-1/confirm HTTP/1.1\r\nHost: rms\r\n" + auth + b"\r\n",
        "401": b"HEAD /v1/messages/m-1 HTTP/1.1\r\nHost: rms\r\nAuthorization: Bearer no\r\n\r\n",
        "413": b"HEAD /v1/messages/m-1 HTTP/1.1\r\nHost: rms\r\n" + auth
               + b"Content-Length: %d\r\n\r\n%s" % (TOO_LARGE, b" " * TOO_LARGE),
        "rate limit": b"HEAD /v1/messages/m-1 HTTP/1.1\r\nHost: rms\r\n" + auth + b"\r\n",
        "admin 401": b"HEAD /v1/admin/stats HTTP/1.1\r\nHost: rms\r\n\r\n",
        "401 (the gate: no key)": b"HEAD /v1/messages/m-1 HTTP/1.1\r\nHost: rms\r\n\r\n",
    }
    answers = {name: await _head_then_health(serve, request) for name, request in probes.items()}

    stop = asyncio.Event()
    holding = asyncio.create_task(_hold_the_place(serve, auth, stop))
    await asyncio.sleep(1.0)
    try:
        answers["503 (the gate, before the application)"] = await _head_then_health(
            serve, b"HEAD /v1/messages/m-1 HTTP/1.1\r\nHost: rms\r\n" + auth + b"\r\n")
    finally:
        stop.set()
        await holding
    await _until_admitted(serve, auth)

    reader, writer = await asyncio.open_connection("127.0.0.1", serve)
    writer.write(b"HEAD /v1/messages/m-1 HTTP/1.1\r\nHost: rms\r\n" + auth
                 + b"Content-Length: 10\r\n\r\n")  # a body that never comes
    timed_out = await asyncio.wait_for(reader.read(), 10)
    writer.close()

    for name, (head, following) in answers.items():
        assert head.startswith(b"HTTP/1.1 4") or head.startswith(b"HTTP/1.1 5"), (name, head)
        if following:
            assert following == b"HTTP/1.1 200 OK\r\n", (name, head, following)
    assert answers["503 (the gate, before the application)"][0].startswith(b"HTTP/1.1 503 ")
    assert answers["401 (the gate: no key)"][0].startswith(b"HTTP/1.1 401 ")
    # answered before its body, which then never comes: the 405's head, no body, and the
    # connection's own 408 at the body deadline
    refused, _, rest = timed_out.partition(b"\r\n\r\n")
    assert refused.startswith(b"HTTP/1.1 405 "), timed_out
    assert rest.startswith(b"HTTP/1.1 408 "), timed_out
