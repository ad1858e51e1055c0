"""Producers that misbehave: every fault counts as ``unknown``, retries stay bounded by
max_checks, and the message ends dead (check-exhausted), never lost and never called again."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from datetime import datetime

import orjson
import pytest

from confirm_service.runtime import checkback_worker
from rms.config import Settings
from rms.devstack.embedded import free_port
from tests.integration.checkback.helpers import FAST, all_settled, drive, events, message
from tests.integration.checkback.servers import Call, CallbackServer, Reply
from tests.support import Api, AppKeys

MAX_CHECKS = 2
TEN_MB = 10 * 1024 * 1024
ANSWER = b'{"status": "committed"}'
FAULTS = {
    "/slow": Reply.answer("committed", delay=2.5),
    "/5xx": Reply(status=503, body=ANSWER),
    "/redirect": Reply(status=302, headers=(("location", "/elsewhere"),)),
    "/redirect-out": Reply(status=307, headers=(("location", "http://127.0.0.1:1/x"),)),
    "/malformed": Reply(body=b"committed, I think"),
    "/wrong-status": Reply(body=orjson.dumps({"status": "COMMITTED"})),
    "/not-an-object": Reply(body=b'["committed"]'),
    "/huge": Reply(body=ANSWER + b" " * TEN_MB),
    "/huge-chunked": Reply(body=ANSWER + b" " * TEN_MB, chunks=160),
}
EXPECTED_ERRORS = {
    "/slow": "no answer within 1s",
    "/5xx": "HTTP 503",
    "/redirect": "HTTP 302 redirect (never followed)",
    "/redirect-out": "HTTP 307 redirect (never followed)",
    "/malformed": "malformed answer: not JSON",
    "/wrong-status": "malformed answer: status 'COMMITTED' is not one of",
    "/not-an-object": "malformed answer: status 'None'",
    "/huge": f"response of {TEN_MB + len(ANSWER)} bytes exceeds the 65536-byte limit",
    "/huge-chunked": "response exceeds the 65536-byte limit",
}


async def by_path(call: Call) -> Reply:
    return FAULTS.get(call.path, Reply(status=404))


async def test_every_fault_is_unknown_and_bounded(
        api: Api, server: CallbackServer, worker_settings: Settings, topic: str,
        unique: str) -> None:
    refused_origin = f"http://127.0.0.1:{free_port()}/"
    producer = await api.create_app(f"faulty-{unique}", prefixes=[server.url, refused_origin])
    ids = {path: await api.prepared_id(producer, topic, check_url=server.url + path[1:],
                                       max_checks=MAX_CHECKS, **FAST) for path in FAULTS}
    ids["refused"] = await api.prepared_id(producer, topic, check_url=refused_origin + "check",
                                           max_checks=MAX_CHECKS, **FAST)
    server.behaviour = by_path

    async with checkback_worker(worker_settings) as worker:
        await drive(worker, lambda: all_settled(api, producer, list(ids.values())))

    for path, message_id in ids.items():
        found = await message(api, producer, message_id)
        assert (found["state"], found["dead"], found["dead_reason"], found["check_count"]) == (
            "pending-send", True, "check-exhausted", MAX_CHECKS), path
    for path in FAULTS:
        assert len(server.calls_to(path)) == MAX_CHECKS, path
    assert server.calls_to("/elsewhere") == []
    assert len(server.calls) == MAX_CHECKS * len(FAULTS)
    await _assert_errors(api, producer, ids)


async def _assert_errors(api: Api, producer: AppKeys, ids: dict[str, str]) -> None:
    expected = EXPECTED_ERRORS | {"refused": "ConnectError"}
    for path, message_id in ids.items():
        checked = [e["detail"] for e in await events(api, producer, message_id)
                   if e["event"] == "checked"]
        assert [c["attempt"] for c in checked] == [1, 2]
        assert {c["outcome"] for c in checked} == {"unknown"}
        for detail in checked:
            assert detail["error"].startswith(expected[path]), (path, detail)


async def test_unknown_retries_back_off(api: Api, producer: AppKeys, server: CallbackServer,
                                        worker_settings: Settings, topic: str) -> None:
    """Waits between calls grow (doubling, with jitter, capped) on the database clock."""
    message_id = await api.prepared_id(producer, topic, check_url=server.url + "check",
                                       max_checks=4, check_after_seconds=0.1)
    settings = worker_settings.model_copy(update={"check_backoff_cap_seconds": 0.6})
    async with checkback_worker(settings) as worker:
        await drive(worker, lambda: all_settled(api, producer, [message_id]))
    history = await events(api, producer, message_id)
    checked = [e["at"] for e in history if e["event"] == "checked"]
    assert len(checked) == 4
    times = [datetime.fromisoformat(at) for at in checked]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    # next_check_delay after attempt n: 0.1 * 2**n, +-20%, capped at 0.6
    for gap, nominal in zip(gaps, [0.2, 0.4, 0.6], strict=True):
        assert nominal * 0.8 - 0.01 <= gap <= nominal * 1.2 + 1.5, gaps  # slack: busy CI


class DroppingServer:
    """A raw HTTP/1.1 server that reads each request and closes the connection without an
    answer the first ``drops`` times, then answers committed."""

    def __init__(self, drops: int) -> None:
        self.drops = drops
        self.requests = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length"))
                await reader.readexactly(length)
                self.requests += 1
                if self.requests <= self.drops:
                    break
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"content-length: 23\r\n\r\n" + ANSWER)
                await writer.drain()
        writer.close()


@pytest.mark.parametrize(("drops", "state", "requests"), [(1, "sent", 2), (99, "pending-send", 2)])
async def test_a_connection_dropped_after_the_request_is_one_unknown_call(
        api: Api, worker_settings: Settings, topic: str, unique: str, drops: int, state: str,
        requests: int) -> None:
    """A server that read the call and closed without answering got the call: the attempt is
    unknown (no second call with the same webhook-id), the next attempt asks again, and
    max_checks bounds the calls. (Only a reused keep-alive connection closed before the call
    reached the server is retried at once: tests/integration/checkback/test_http11.py.)"""
    dropping = DroppingServer(drops)
    server = await asyncio.start_server(dropping.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    producer = await api.create_app(f"drop-{unique}", prefixes=[f"http://127.0.0.1:{port}/"])
    message_id = await api.prepared_id(producer, topic, check_url=f"http://127.0.0.1:{port}/c",
                                       max_checks=2, **FAST)
    async with server, checkback_worker(worker_settings) as worker:
        await drive(worker, lambda: all_settled(api, producer, [message_id]))
    found = await message(api, producer, message_id)
    assert (found["state"], dropping.requests) == (state, requests)
