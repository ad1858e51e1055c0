"""uvicorn's httptools protocol with read deadlines for slow clients.

uvicorn bounds only the idle time between two requests of a keep-alive connection. A client
that sends its request head or body a byte at a time would hold a connection (and, with many
of them, every slot of ``limit_concurrency``) for as long as it likes. Here a request head must
be complete within :attr:`DeadlineProtocol.head_seconds` of the connection (or of its first
bytes on a kept-alive connection, whose idle time uvicorn bounds), and its body within
:attr:`DeadlineProtocol.body_seconds` of the head; past a deadline the client gets
``408 Request Timeout`` (when no response has begun) and the connection is closed.

With a concurrency limit (:mod:`message_service.admission`), the protocol also asks the gate
before it starts a request: a refused request gets its 503 written straight to the connection,
without an ASGI task or the framework's layers, and its body (if any) is read and dropped by the
parser, as for any request answered before its body; the connection stays usable.

The process's connections are counted by :class:`~message_service.connections.Connections`:
a connection that never showed an app's API key is kept alive between requests for a short
time only, the oldest idle connection makes room for a new one at the cap, and above the cap
only health checks are served (from a reserve); any other request there gets a 503 problem
document with ``Retry-After``, and the connection is closed after it.
"""

from __future__ import annotations

import asyncio
from http import HTTPStatus
from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from message_service.admission import (
    REFUSALS,
    RETRY_AFTER_SECONDS,
    UNAUTHORIZED,
    Admission,
    Answer,
    Unknown,
    authorization_of,
    bearer_key,
    limited,
)
from message_service.connections import Connections
from message_service.problems import MEDIA_TYPE, PROBLEM_TYPE_BASE


class RawAnswer:
    """A whole HTTP/1.1 answer that the protocol writes to the connection itself, built once
    in each of its forms: with ``connection: close`` or not, and with its body or, answering a
    HEAD request, without it (a HEAD answer has none: a client reusing the connection would
    read a body as the next answer). Every answer the protocol writes itself is one of these."""

    def __init__(self, status: bytes, headers: tuple[tuple[bytes, bytes], ...],
                 body: bytes) -> None:
        lines = [status, *(name + b": " + value for name, value in headers)]
        keep, close = b"\r\n".join(lines), b"\r\n".join([*lines, b"connection: close"])
        self._forms = {(keep_alive, head): whole + b"\r\n\r\n" + (b"" if head else body)
                       for keep_alive, whole in ((True, keep), (False, close))
                       for head in (True, False)}

    def bytes(self, keep_alive: bool, method: str | None) -> bytes:
        """The answer to a request of ``method`` (None: its head never arrived)."""
        return self._forms[keep_alive, method == "HEAD"]


def _timeout_answer() -> RawAnswer:
    body = orjson.dumps({
        "type": PROBLEM_TYPE_BASE + "request-timeout", "title": "Request timeout", "status": 408,
        "detail": "the request head or body did not arrive in time; send it again"})
    return RawAnswer(b"HTTP/1.1 408 Request Timeout",
                     ((b"content-type", MEDIA_TYPE.encode()),
                      (b"content-length", str(len(body)).encode())), body)


TIMEOUT = _timeout_answer()
OVER_CAP = Answer.problem(
    HTTPStatus.SERVICE_UNAVAILABLE, "Too many connections", "too-many-connections",
    "the server holds as many connections as it may and every one is busy; retry after the "
    "Retry-After seconds", (b"retry-after", str(RETRY_AFTER_SECONDS).encode()))
GATE_ANSWERS = {answer: RawAnswer(b"HTTP/1.1 %d %s" % (answer.status, answer.reason),
                                      answer.headers, answer.body)
                for answer in (*REFUSALS, UNAUTHORIZED, OVER_CAP)}


class DeadlineProtocol(HttpToolsProtocol):
    """Set the two deadlines (seconds) before the server starts: ``rms serve`` does it."""

    head_seconds: float = 10.0
    body_seconds: float = 30.0
    gate: Admission | None = None
    open_connections: Connections | None = None
    unauthenticated_keep_alive_seconds: float = 5.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._full_keep_alive = self.timeout_keep_alive
        if self.open_connections is not None:  # until it shows an app's API key
            self.timeout_keep_alive = min(self._full_keep_alive,
                                          max(1, round(self.unauthenticated_keep_alive_seconds)))

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.head_seconds)
        if self.open_connections is not None:
            self.open_connections.opened(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self.open_connections is not None:
            self.open_connections.closed(self)
        super().connection_lost(exc)

    def close_idle(self) -> None:
        """Make room at the cap (:class:`~message_service.connections.Connections`)."""
        self._disarm()
        self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        registry = self.open_connections
        if registry is not None and not self.pipeline and not self.transport.is_closing():
            registry.idle(self)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._arm(self.body_seconds)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()

    def data_received(self, data: bytes) -> None:
        waiting = self.cycle is None or self.cycle.response_complete
        if waiting:
            if self._deadline is None:
                self._arm(self.head_seconds)  # the first bytes of a keep-alive connection's next head
            if self.open_connections is not None:
                self.open_connections.busy(self)
        super().data_received(data)

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        answer = self._gate_answer(cycle.scope)
        if answer is not None:
            if answer is OVER_CAP:
                cycle.keep_alive = False
            self._answer(cycle, GATE_ANSWERS[answer])
            return
        super()._start_asgi_task(cycle, app)

    def _gate_answer(self, scope: Any) -> Answer | None:
        """What the protocol answers the request itself: a 503 above the connection cap (but
        to a health check within the reserve), or the gate's answer (a 503 refusal, or a 401
        to a caller known not to authenticate), from its caller as known without a query (the
        admission middleware decides the rest, once it knows the caller)."""
        path = scope["path"]
        if self.open_connections is not None and not self.open_connections.admits(self, path):
            return OVER_CAP
        gate = self.gate
        if gate is None:  # nothing to tell a key from a guess: a bearer key is trusted here
            if bearer_key(authorization_of(scope)) is not None:
                self._authenticated()
            return None
        caller = gate.recall(authorization_of(scope))
        if isinstance(caller, str):
            self._authenticated()
        if isinstance(caller, Unknown) or not limited(path):
            return None
        return gate.answer(scope["method"], path, caller)

    def _authenticated(self) -> None:
        """The connection carried an app's API key: it keeps the full keep-alive."""
        if self.open_connections is not None and not self.open_connections.is_authenticated(self):
            self.open_connections.authenticated(self)
            self.timeout_keep_alive = self._full_keep_alive

    def _answer(self, cycle: RequestResponseCycle, answer: RawAnswer) -> None:
        """Answer the request with one of the gate's answers without running the
        application."""
        cycle.response_started = cycle.response_complete = True
        self.transport.write(answer.bytes(cycle.keep_alive, cycle.scope["method"]))
        if cycle.keep_alive:
            self.on_response_complete()
        else:
            self.transport.close()

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is None or cycle.response_complete:  # no request, or its head is arriving
            self.transport.write(TIMEOUT.bytes(False, None))
        elif not cycle.response_started:
            self.transport.write(TIMEOUT.bytes(False, cycle.scope["method"]))
        self.transport.close()


def configure_deadlines(head_seconds: float, body_seconds: float) -> None:
    DeadlineProtocol.head_seconds = head_seconds
    DeadlineProtocol.body_seconds = body_seconds


def configure_connections(cap: int, reserve: int, unauthenticated_keep_alive: float) -> None:
    """Count the process's connections against ``cap`` (:mod:`message_service.connections`)."""
    DeadlineProtocol.open_connections = Connections(cap, reserve)
    DeadlineProtocol.unauthenticated_keep_alive_seconds = unauthenticated_keep_alive


def configure_admission(gate: Admission | None) -> None:
    """The process's concurrency gate (None: no limit), asked before every request starts."""
    DeadlineProtocol.gate = gate
