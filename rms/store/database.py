"""Engine creation. Pool sizing and timeouts come from Settings, passed in by the caller."""

from __future__ import annotations

import socket
from typing import Any

import orjson
from sqlalchemy import event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from rms.config import WorkerSettings


def normalise_url(url: str) -> str:
    """Accept plain ``postgresql://`` URLs too and use the asyncpg driver."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix):]
    return url


def _json_dumps(value: object) -> str:
    return orjson.dumps(value).decode()


def create_engine(settings: WorkerSettings, *, pool_size: int | None = None) -> AsyncEngine:
    """One engine per process. ``pool_timeout`` bounds the wait so overload answers 503."""
    engine = create_async_engine(
        normalise_url(settings.database_url),
        pool_size=pool_size or settings.db_pool_size,
        max_overflow=settings.db_max_overflow,
        pool_timeout=settings.db_pool_timeout_seconds,
        pool_pre_ping=False,
        pool_recycle=1800,
        # every use is an `engine.begin()` / `engine.connect()` block, which commits or rolls
        # back its own transaction on exit: the pool's extra ROLLBACK per checkin is a wasted
        # round trip on every request
        pool_reset_on_return=None,
        connect_args={"server_settings": {
            "application_name": "rms",
            # a session whose client vanished without a reset (a lost RST) would otherwise
            # keep its transaction's row locks until TCP keepalive notices, hours later
            "idle_in_transaction_session_timeout":
                str(int(settings.db_idle_in_transaction_timeout_seconds * 1000)),
        }},
        json_serializer=_json_dumps,
        json_deserializer=orjson.loads,
    )
    event.listen(engine.sync_engine.pool, "checkout", _skip_closed)
    return engine


def _skip_closed(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """A pooled connection the server already closed (restart, ``pg_terminate_backend``) is
    replaced at checkout, without the round trip of ``pool_pre_ping``: the pool retries with
    a new connection when a checkout listener raises DisconnectionError."""
    if dbapi_connection.driver_connection.is_closed():
        raise DisconnectionError("the server closed this pooled connection")


class DatabaseUrlError(ValueError):
    """``RMS_DATABASE_URL`` cannot be parsed (the message never repeats the URL: it may hold a
    password)."""


def database_location(url: str) -> str:
    """``host:port/database`` of ``url``, without user or password, for messages and logs."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
        port = parsed.port or 5432
    except (ArgumentError, ValueError) as exc:
        reason = "not of the form postgresql+asyncpg://user:password@host:port/database"
        if "port" in str(exc).lower() or "int()" in str(exc):
            reason = "its port is not a number"
        raise DatabaseUrlError(f"RMS_DATABASE_URL cannot be parsed: {reason}") from None
    return f"{parsed.host or 'localhost'}:{port}/{parsed.database or ''}"


def connect_failure(url: str, exc: BaseException) -> str:
    """One line naming where PostgreSQL was expected and why it could not be used."""
    cause: BaseException = exc
    while cause.__cause__ is not None and not isinstance(cause, OSError):
        cause = cause.__cause__
    text = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
    if isinstance(cause, socket.gaierror):
        text = f"the host name does not resolve ({text})"
    return f"cannot use PostgreSQL at {database_location(url)}: {type(cause).__name__}: {text}"
