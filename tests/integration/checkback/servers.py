"""Real HTTP servers for check-back tests: uvicorn on a free loopback port, in the test's own
event loop, answering each call as the test scripts it and recording every call made."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
import uvicorn

from rms.devstack.embedded import free_port as free_ipv4_port

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class Call:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = orjson.loads(self.body)
        return data

    @property
    def message_id(self) -> str:
        return str(self.json["message_id"])

    @property
    def check_count(self) -> int:
        return int(self.json["check_count"])


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = (("content-type", "application/json"),)
    delay: float = 0.0
    chunks: int = 1  # >1: stream the body in pieces without a content-length

    @classmethod
    def answer(cls, status: str, *, delay: float = 0.0) -> Reply:
        return cls(body=orjson.dumps({"status": status}), delay=delay)


Behaviour = Callable[[Call], Awaitable[Reply]]


def free_port(host: str = "127.0.0.1") -> int:
    if ":" not in host:
        return free_ipv4_port(host)
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


async def unknown(_call: Call) -> Reply:
    return Reply.answer("unknown")


@dataclass
class CallbackServer:
    """``behaviour`` decides each reply; ``calls`` lists every request in arrival order."""

    host: str = "127.0.0.1"
    port: int = field(default_factory=free_port)
    behaviour: Behaviour = unknown
    calls: list[Call] = field(default_factory=list)
    closing: asyncio.Event = field(default_factory=asyncio.Event)  # ends slow replies early

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def calls_to(self, path: str) -> list[Call]:
        return [call for call in self.calls if call.path == path]

    def per_message(self) -> Counter[str]:
        return Counter(call.message_id for call in self.calls)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        body = b""
        while True:
            event = await receive()
            if event["type"] == "http.disconnect":  # the caller gave up before we read it
                return
            body += event.get("body", b"")
            if not event.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        call = Call(scope["path"], headers, body)
        self.calls.append(call)
        reply = await self.behaviour(call)
        if reply.delay:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.closing.wait(), reply.delay)
        await _send(send, reply)


async def _send(send: Send, reply: Reply) -> None:
    headers = [(k.encode(), v.encode()) for k, v in reply.headers]
    if reply.chunks <= 1:
        headers.append((b"content-length", str(len(reply.body)).encode()))
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    size = max(1, -(-len(reply.body) // max(1, reply.chunks)))
    pieces = [reply.body[i:i + size] for i in range(0, len(reply.body), size)] or [b""]
    for index, piece in enumerate(pieces):
        await send({"type": "http.response.body", "body": piece,
                    "more_body": index < len(pieces) - 1})


@contextlib.asynccontextmanager
async def serving(app: Any, host: str = "127.0.0.1", port: int | None = None,
                  lifespan: Literal["on", "off"] = "off") -> AsyncIterator[int]:
    """Serve an ASGI ``app`` with uvicorn until the block ends; yields the port."""
    chosen = port or free_port(host)
    config = uvicorn.Config(app, host=host, port=chosen, log_level="warning", lifespan=lifespan,
                            ws="none", access_log=False, timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield chosen
    finally:
        server.should_exit = True
        await task


@contextlib.asynccontextmanager
async def callback_server(host: str = "127.0.0.1") -> AsyncIterator[CallbackServer]:
    server = CallbackServer(host=host, port=free_port(host))
    async with serving(server, host, server.port):
        try:
            yield server
        finally:
            server.closing.set()
