"""A small HTTP/1.1 client for check-back calls: keep-alive connections pooled per pinned
origin, on asyncio protocols with httptools' C response parser.

Why not httpx: a check-back is one small POST and one small answer, and on
the check-back benchmark, httpx + httpcore + anyio + h11 spent about 2 ms of CPU per call (three
quarters of the worker), which capped a worker at about 300 calls/s on a 2-CPU machine. This
client does the same exchange in a few tens of microseconds.

What it keeps from the httpx setup it replaces:

* **pinning** (DNS rebinding): a connection goes to the address the SSRF guard checked
  (``CallTarget.address``), never to a fresh DNS answer; the Host header and TLS SNI and
  certificate checks use the URL's host name. Connections are pooled per
  ``(scheme, host, port, address)``, so a connection is only ever reused for the address it
  was opened to. Without a checked address it connects by name only when private callbacks are
  allowed (no address was checked then), else refuses.
* redirects are never followed (the caller sees the 3xx status);
* ``accept-encoding: identity`` (no decompression bomb) and a size cap on what is read, checked
  against the declared length before reading and while reading (chunked answers too);
* idle connections are dropped after ``keepalive_seconds``, before common servers drop them;
* every legal HTTP/1.1 answer is read: ``Content-Length``, chunked, or a body that ends when the
  server closes the connection (HTTP/1.0 style); interim ``1xx`` answers (``100 Continue``)
  are skipped, ``101`` is refused; ``Connection: close`` is honoured;
* errors are raised as :class:`ConnectError`, :class:`RemoteProtocolError` (the server closed or
  broke the connection, or sent something that is not HTTP/1.1) or :class:`TooLarge`. Only
  :class:`StaleConnection` is retried, once, on a fresh connection: a kept-alive connection
  that the server closed before any byte of the answer (it had dropped the idle connection as
  we reused it). Anything else the server did is its answer: asking again would make a second
  call with the same ``webhook-id``.

Timeouts are the caller's (``asyncio.timeout`` around the call): a cancelled exchange closes its
connection, whose state is then unknown.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass, field
from typing import cast
from urllib.parse import quote, urlsplit

import httptools

from rms.callback_urls import CallTarget

USER_AGENT = "rms-confirm-service/1"
MAX_HEAD_BYTES = 65536
_SAFE_PATH = "/%:@!$&'()*+,;=-._~"
_SAFE_QUERY = _SAFE_PATH + "?"


class HttpError(Exception):
    """The exchange failed; ``str()`` says why."""


class ConnectError(HttpError):
    """No connection could be made (refused, unreachable, TLS, or not allowed by pinning)."""


class RemoteProtocolError(HttpError):
    """The server closed the connection or sent something that is not HTTP/1.1."""


class StaleConnection(RemoteProtocolError):
    """A reused keep-alive connection was closed before any byte of the answer arrived."""


class TooLarge(HttpError):
    """The answer is larger than the caller's limit (not read on)."""


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes


@dataclass(slots=True)
class _Exchange:
    """The state of one request on a connection."""

    limit: int
    done: asyncio.Future[Reply]
    status: int = 0  # set once the head (status line and headers) of the final answer is complete
    head_bytes: int = 0
    received: int = 0  # bytes of the answer, interim answers included
    declared: int = -1
    chunked: bool = False
    interim: bool = False  # the head just parsed was a 1xx: another answer follows
    size: int = 0
    chunks: list[bytes] = field(default_factory=list)

    def next_answer(self) -> None:
        """After an interim 1xx answer: the final one is still to come."""
        self.status, self.head_bytes, self.declared, self.chunked = 0, 0, -1, False
        self.interim = False

    @property
    def close_delimited(self) -> bool:
        """Its body ends when the server closes the connection (no length, not chunked)."""
        return bool(self.status) and self.declared < 0 and not self.chunked


class _Connection(asyncio.Protocol):
    """One keep-alive connection; at most one exchange at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._exchange: _Exchange | None = None
        self._reusable = False

    # ---- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._exchange is not None:
            self._exchange.received += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(RemoteProtocolError("unexpected protocol upgrade"))
        except httptools.HttpParserError as exc:
            self._fail(RemoteProtocolError(f"malformed HTTP response: {exc}"))
        exchange = self._exchange
        if exchange is not None and not exchange.status:  # the head is still incomplete
            exchange.head_bytes += len(data)
            if exchange.head_bytes > MAX_HEAD_BYTES:  # as h11's limit: no endless headers
                self._fail(RemoteProtocolError(f"response head exceeds {MAX_HEAD_BYTES} bytes"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        exchange = self._exchange
        if exchange is not None and exchange.close_delimited and not exchange.interim:
            self._finish(exchange, reusable=False)  # the close ends the body: a full answer
        elif exchange is not None and exchange.received == 0:
            self._fail(StaleConnection("server closed the connection before answering"))
        else:
            self._fail(RemoteProtocolError("server disconnected without sending a complete "
                                           "answer"))

    # ---- httptools callbacks --------------------------------------------------------------

    def on_headers_complete(self) -> None:
        exchange = self._exchange
        if exchange is None:
            return self._fail(RemoteProtocolError("answer without a request"))
        exchange.status = self._parser.get_status_code()
        if exchange.status == 101:
            return self._fail(RemoteProtocolError("unexpected 101 Switching Protocols"))
        if 100 <= exchange.status < 200:  # interim (100 Continue, 103 Early Hints): skipped
            exchange.interim = True
            return None
        if not 200 <= exchange.status < 300:  # the caller needs only the status
            return self._finish(exchange, reusable=False)
        if exchange.declared > exchange.limit:
            return self._fail(TooLarge(f"response of {exchange.declared} bytes exceeds the "
                                       f"{exchange.limit}-byte limit"))
        return None

    def on_header(self, name: bytes, value: bytes) -> None:
        exchange = self._exchange
        if exchange is None:
            return
        header = name.lower()
        if header == b"content-length" and value.isdigit():
            exchange.declared = int(value)
        elif header == b"transfer-encoding" and b"chunked" in value.lower():
            exchange.chunked = True

    def on_body(self, body: bytes) -> None:
        exchange = self._exchange
        if exchange is None:
            return
        exchange.size += len(body)
        if exchange.size > exchange.limit:
            return self._fail(TooLarge(f"response exceeds the {exchange.limit}-byte limit"))
        exchange.chunks.append(body)
        return None

    def on_message_complete(self) -> None:
        exchange = self._exchange
        if exchange is None:
            return
        if exchange.interim:
            exchange.next_answer()
            return
        self._finish(exchange, reusable=self._parser.should_keep_alive())

    # ---- use ------------------------------------------------------------------------------

    async def exchange(self, request: bytes, limit: int) -> Reply:
        transport = self.transport
        if transport is None or self.closed:
            raise StaleConnection("connection closed before the request was sent")
        done: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._exchange = _Exchange(limit, done)
        self._reusable = False
        transport.write(request)
        try:
            return await done
        except BaseException:
            self.close()  # cancelled (timeout) or failed: the connection's state is unknown
            raise

    @property
    def reusable(self) -> bool:
        return self._reusable and not self.closed

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _finish(self, exchange: _Exchange, *, reusable: bool) -> None:
        self._exchange = None
        self._reusable = reusable
        if not reusable:
            self.close()
        if not exchange.done.done():
            exchange.done.set_result(Reply(exchange.status, b"".join(exchange.chunks)))

    def _fail(self, error: HttpError) -> None:
        exchange, self._exchange = self._exchange, None
        self.close()
        if exchange is not None and not exchange.done.done():
            exchange.done.set_exception(error)


Origin = tuple[str, str, int, str | None]


@dataclass(frozen=True, slots=True)
class Request:
    """A POST to ``url`` over a connection pinned to ``target``."""

    url: str
    target: CallTarget
    body: bytes
    headers: dict[str, str]
    limit: int


class Http11Pool:
    """Idle keep-alive connections per pinned origin. Concurrency is the caller's to bound."""

    def __init__(self, *, allow_unpinned: bool, keepalive_seconds: float,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self._allow_unpinned = allow_unpinned
        self._keepalive = keepalive_seconds
        self._ssl = ssl_context
        self._idle: dict[Origin, list[_Connection]] = {}

    async def post(self, request: Request) -> Reply:
        """One exchange. Repeated once on a fresh connection only if a reused keep-alive
        connection was closed before any byte of the answer (the server had dropped it as we
        reused it, so it never saw the request); every other failure is final."""
        parts = urlsplit(request.url)
        origin: Origin = (parts.scheme, request.target.host, request.target.port,
                          str(request.target.address) if request.target.address else None)
        raw = _request_bytes(parts.path, parts.query, request)
        reused = self._take(origin)
        if reused is None:
            return await self._use(origin, await self._connect(origin), raw, request.limit)
        try:
            return await self._use(origin, reused, raw, request.limit)
        except StaleConnection:
            return await self._use(origin, await self._connect(origin), raw, request.limit)

    async def aclose(self) -> None:
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
        self._idle.clear()

    async def _use(self, origin: Origin, connection: _Connection, raw: bytes, limit: int
                   ) -> Reply:
        reply = await connection.exchange(raw, limit)
        if connection.reusable:
            connection.idle_since = time.monotonic()
            self._idle.setdefault(origin, []).append(connection)
        return reply

    def _take(self, origin: Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if not connection.closed and now - connection.idle_since < self._keepalive:
                return connection
            connection.close()
        return None

    async def _connect(self, origin: Origin) -> _Connection:
        scheme, host, port, address = origin
        if address is None and not self._allow_unpinned:
            raise ConnectError(f"refusing to connect to {host}:{port}: no checked address")
        tls = self._tls() if scheme == "https" else None
        loop = asyncio.get_running_loop()
        try:
            _, connection = await loop.create_connection(
                _Connection, address or host, port, ssl=tls,
                server_hostname=host if tls is not None else None)
        except (OSError, ssl.SSLError) as exc:
            raise ConnectError(str(exc) or type(exc).__name__) from exc
        return connection

    def _tls(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl


def _request_bytes(path: str, query: str, request: Request) -> bytes:
    target = quote(path or "/", safe=_SAFE_PATH)
    if query:
        target += "?" + quote(query, safe=_SAFE_QUERY)
    host = request.target.host
    default_port = 443 if request.url.startswith("https:") else 80
    if request.target.port != default_port:
        host = f"{host}:{request.target.port}"
    if ":" in request.target.host:  # an IPv6 literal
        host = host.replace(request.target.host, f"[{request.target.host}]", 1)
    lines = [f"POST {target} HTTP/1.1", f"host: {host}", f"user-agent: {USER_AGENT}",
             "accept-encoding: identity", f"content-length: {len(request.body)}"]
    lines += [f"{name}: {_header_value(value)}" for name, value in request.headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + request.body


def _header_value(value: str) -> str:
    if "\r" in value or "\n" in value:
        raise ValueError("a header value must not contain CR or LF")
    return value
