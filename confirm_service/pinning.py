"""Connection pinning: a check-back call connects to the address the SSRF guard checked, never
to a fresh DNS answer (which an attacker's DNS server could point at 127.0.0.1 between the
check and the connect: "DNS rebinding").

The URL keeps its hostname, so the Host header, TLS SNI and certificate checks are unchanged;
only the TCP connect is redirected, by an httpcore network backend that reads the checked
target from a context variable the caller sets around each request.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from contextvars import ContextVar

import httpcore
import httpx

from rms.callback_urls import CallTarget

_TARGET: ContextVar[CallTarget | None] = ContextVar("rms_check_target", default=None)
SocketOption = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]


@contextlib.contextmanager
def pinned(target: CallTarget) -> Iterator[None]:
    """Calls made inside this block connect to ``target.address`` (when it has one)."""
    token = _TARGET.set(target)
    try:
        yield
    finally:
        _TARGET.reset(token)


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """Connects to the pinned address for the pinned host and port; refuses any other
    connection unless ``allow_unpinned`` (private callbacks allowed: no address was checked)."""

    def __init__(self, *, allow_unpinned: bool,
                 backend: httpcore.AsyncNetworkBackend | None = None) -> None:
        self._allow_unpinned = allow_unpinned
        self._backend = backend or httpcore.AnyIOBackend()

    async def connect_tcp(
        self, host: str, port: int, timeout: float | None = None,  # noqa: ASYNC109 - httpcore's
        local_address: str | None = None, socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        address = self._address_for(host, port)
        return await self._backend.connect_tcp(address, port, timeout=timeout,
                                               local_address=local_address,
                                               socket_options=socket_options)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None,  # noqa: ASYNC109 - httpcore's
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("check-back calls never use unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)

    def _address_for(self, host: str, port: int) -> str:
        target = _TARGET.get()
        if target is None or target.address is None:
            if self._allow_unpinned:
                return host
            raise httpcore.ConnectError(f"refusing to connect to {host}:{port}: no checked address")
        if (host.lower(), port) != (target.host, target.port):
            raise httpcore.ConnectError(f"refusing to connect to {host}:{port}: the checked "
                                        f"target is {target.host}:{target.port}")
        return str(target.address)


class PinnedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport (pooling, TLS, error mapping) over a :class:`PinnedBackend`."""

    def __init__(self, *, allow_unpinned: bool, limits: httpx.Limits,
                 backend: httpcore.AsyncNetworkBackend | None = None) -> None:
        super().__init__(limits=limits, trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=PinnedBackend(allow_unpinned=allow_unpinned, backend=backend),
        )
