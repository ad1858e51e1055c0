"""The open HTTP connections of one server process, and who may keep one.

A connection is a file descriptor and a buffer, and the process holds at most ``cap`` of them
(``RMS_HTTP_LIMIT_CONCURRENCY``). Idle keep-alive connections would otherwise let anyone hold
that capacity for the price of one request per keep-alive period: a thousand sockets that each
sent one keyless ``GET /healthz`` would shut every new client out, health checks included. So:

- a connection that has not shown a known API key is kept alive between requests for a short
  time only (``RMS_HTTP_UNAUTHENTICATED_KEEP_ALIVE_SECONDS``), where an authenticated one gets
  the full keep-alive;
- when a new connection finds the process at its cap, the oldest idle connection (between two
  requests) is closed to make room, one that never authenticated before one that did: an idle
  connection holds nothing a client can lose, and closing it is what a keep-alive time-out
  does anyway;
- when every connection is busy, the new one is still read: a health check on it is answered
  from a reserve of ``RMS_HTTP_HEALTH_RESERVE`` connections above the cap, so a load balancer
  keeps seeing the instance alive, and any other request gets the 503 problem document with
  ``Retry-After`` that every refusal of RMS is.

Pure bookkeeping: the HTTP protocol (:mod:`message_service.http_protocol`) reports what each
connection does and closes what this registry chooses.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Protocol

HEALTH_PATHS = frozenset({"/healthz", "/readyz"})


class Connection(Protocol):
    def close_idle(self) -> None:
        """Close the connection, which is between requests."""


@dataclass
class Connections:
    """Every open connection, the idle ones in the order they became idle."""

    cap: int
    reserve: int
    _open: set[Connection] = field(default_factory=set)
    _authenticated: set[Connection] = field(default_factory=set)
    # idle connections, oldest first, in two queues: never authenticated, and authenticated
    _idle: tuple[OrderedDict[Connection, None], OrderedDict[Connection, None]] = field(
        default_factory=lambda: (OrderedDict(), OrderedDict()))

    @property
    def count(self) -> int:
        return len(self._open)

    def opened(self, connection: Connection) -> None:
        """A new connection: when the process is at its cap, the oldest idle one is closed to
        make room for it. A connection becomes idle (one that may be closed to make room) once
        it answered a request: until its first request arrives it is bounded by the request
        head's deadline, and closing it could cut a request already on its way."""
        if len(self._open) >= self.cap:
            self._close_oldest_idle()
        self._open.add(connection)

    def closed(self, connection: Connection) -> None:
        self._open.discard(connection)
        self._authenticated.discard(connection)
        for queue in self._idle:
            queue.pop(connection, None)

    def busy(self, connection: Connection) -> None:
        """A request is arriving or being answered on ``connection``."""
        for queue in self._idle:
            queue.pop(connection, None)

    def idle(self, connection: Connection) -> None:
        """``connection`` answered its request and waits for the next one."""
        if connection in self._open:
            self.busy(connection)
            self._idle[connection in self._authenticated][connection] = None

    def authenticated(self, connection: Connection) -> None:
        """A request on ``connection`` carried the API key of an app."""
        if connection in self._open:
            self._authenticated.add(connection)

    def is_authenticated(self, connection: Connection) -> bool:
        return connection in self._authenticated

    def admits(self, connection: Connection, path: str) -> bool:
        """Whether a request for ``path`` on ``connection`` is served: always within the cap;
        above it only a health check, and only within the reserve."""
        if len(self._open) <= self.cap:
            return True
        return path in HEALTH_PATHS and len(self._open) <= self.cap + self.reserve

    def _close_oldest_idle(self) -> None:
        for queue in self._idle:
            if queue:
                oldest, _ = queue.popitem(last=False)
                oldest.close_idle()
                self.closed(oldest)
                return
