"""The connection registry's choices (message_service/connections.py): which idle connection
makes room at the cap, and what is served above it."""

from __future__ import annotations

from message_service.connections import Connections


class Fake:
    def __init__(self, name: str, registry: Connections) -> None:
        self.name, self.registry, self.closed = name, registry, False

    def close_idle(self) -> None:
        self.closed = True

    def __repr__(self) -> str:
        return self.name


def _open(registry: Connections, name: str, *, idle: bool = True) -> Fake:
    connection = Fake(name, registry)
    registry.opened(connection)
    if idle:
        registry.idle(connection)  # it answered one request
    return connection


def test_the_oldest_idle_connection_makes_room_unauthenticated_first() -> None:
    registry = Connections(cap=3, reserve=1)
    tenant = _open(registry, "tenant")
    registry.authenticated(tenant)
    registry.idle(tenant)
    first, second = _open(registry, "first"), _open(registry, "second")
    newcomer = _open(registry, "newcomer", idle=False)
    assert first.closed and not second.closed and not tenant.closed
    assert registry.count == 3 and registry.admits(newcomer, "/v1/messages")
    _open(registry, "another", idle=False)
    assert second.closed and not tenant.closed  # the authenticated one goes last
    _open(registry, "third", idle=False)
    assert tenant.closed


def test_a_connection_busy_or_not_yet_used_is_never_closed_to_make_room() -> None:
    registry = Connections(cap=2, reserve=1)
    silent = _open(registry, "silent", idle=False)
    busy = _open(registry, "busy")
    registry.busy(busy)
    over = _open(registry, "over", idle=False)
    assert not silent.closed and not busy.closed
    assert registry.count == 3
    assert not registry.admits(over, "/v1/messages")
    assert registry.admits(over, "/healthz") and registry.admits(over, "/readyz")
    beyond = _open(registry, "beyond", idle=False)
    assert not registry.admits(beyond, "/healthz")  # past the reserve
    registry.closed(silent)
    registry.closed(busy)
    assert registry.admits(over, "/v1/messages")


def test_a_closed_connection_is_forgotten() -> None:
    registry = Connections(cap=1, reserve=0)
    gone = _open(registry, "gone")
    registry.closed(gone)
    fresh = _open(registry, "fresh")
    assert not gone.closed and registry.count == 1 and registry.admits(fresh, "/v1/x")
