"""Engine creation. Pool sizing and timeouts come from Settings, passed in by the caller."""

from __future__ import annotations

import socket
import ssl
from typing import Any

import orjson
import structlog
from sqlalchemy import event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from rms import metrics
from rms.config import WorkerSettings
from rms.store.dburl import DatabaseUrlError, database_location, parse_database_url

__all__ = ["DatabaseUrlError", "connect_failure", "create_engine", "database_location",
           "open_engine"]
ENGINE_URL = "postgresql+asyncpg://"  # the dialect; where to connect is the async creator's

log = structlog.get_logger(__name__)


def open_engine(url: str, *, connect_args: dict[str, Any] | None = None,
                **engine_args: Any) -> AsyncEngine:
    """An engine on ``RMS_DATABASE_URL`` as :mod:`rms.store.dburl` reads it (sockets, TLS):
    asyncpg connects with the URL's libpq form, SQLAlchemy only pools the connections."""
    return create_async_engine(ENGINE_URL, async_creator=parse_database_url(url).connector(
        **(connect_args or {})), **engine_args)


def _json_dumps(value: object) -> str:
    return orjson.dumps(value).decode()


def create_engine(settings: WorkerSettings, *, pool_size: int | None = None) -> AsyncEngine:
    """One engine per process. ``pool_timeout`` bounds the wait so overload answers 503."""
    engine = open_engine(
        settings.database_url,
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
            # RMS's statements are prepared once per connection and run with arrays of any
            # length (unnest) against a table whose size and state mix change fast. Under the
            # default, a prepared statement soon gets a generic plan that assumes ten rows per
            # array and keeps the statistics seen at that moment: on a table that was small
            # then (a new deployment, or a burst ahead of autovacuum's ANALYZE), that plan
            # joins each batch by scanning every matching row of `messages` once per item.
            # Planning each execution for its values costs a fraction of a millisecond.
            "plan_cache_mode": "force_custom_plan",
        }},
        json_serializer=_json_dumps,
        json_deserializer=orjson.loads,
    )
    event.listen(engine.sync_engine.pool, "checkout", _refuse_unusable)
    event.listen(engine.sync_engine.pool, "checkin", _end_leaked_transaction)
    return engine


def _refuse_unusable(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """A pooled connection is replaced at checkout, without the round trip of
    ``pool_pre_ping``, when the server closed it (restart, ``pg_terminate_backend``) or when
    it is inside a transaction nobody owns: a statement cancelled while its ``BEGIN`` was on
    the wire leaves the server in a transaction the pool cannot see, and every autocommit
    statement run on it afterwards (the request path's group commits) would silently never
    commit. The pool retries with a new connection when a checkout listener raises
    DisconnectionError; closing the old one rolls its transaction back."""
    driver = dbapi_connection.driver_connection
    if driver.is_closed():
        raise DisconnectionError("the server closed this pooled connection")
    if driver.is_in_transaction():
        metrics.DB_CONNECTIONS_DISCARDED.labels("open-transaction").inc()
        log.warning("database.connection_discarded", reason="open-transaction", at="checkout")
        raise DisconnectionError("this pooled connection is inside a transaction nobody owns")


def _end_leaked_transaction(dbapi_connection: Any, _record: Any) -> None:
    """A connection returned inside a transaction is closed at once, so the row locks of that
    transaction are not held while it waits in the pool (the next checkout replaces it).
    Checked without a round trip: the server reports its transaction state with every
    answer."""
    if dbapi_connection is None:
        return
    driver = dbapi_connection.driver_connection
    if not driver.is_closed() and driver.is_in_transaction():
        metrics.DB_CONNECTIONS_DISCARDED.labels("open-transaction").inc()
        log.warning("database.connection_discarded", reason="open-transaction", at="checkin")
        driver.terminate()


def connect_failure(url: str, exc: BaseException) -> str:
    """One line naming where PostgreSQL was expected and why it could not be used."""
    cause: BaseException = exc
    while cause.__cause__ is not None and not isinstance(cause, OSError):
        cause = cause.__cause__
    text = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
    if isinstance(cause, socket.gaierror):
        text = f"the host name does not resolve ({text})"
    return f"cannot use PostgreSQL at {database_location(url)}: {type(cause).__name__}: {text}"


async def tls_problem(url: str, timeout_seconds: float = 5.0) -> str | None:
    """One line (as :func:`connect_failure`) when PostgreSQL's TLS set-up refuses the URL's
    (a server certificate the CA does not sign or that names another host): a configuration
    error that no retry mends. None when a connection opens, or fails for another reason (an
    unreachable server is an outage: the processes keep trying)."""
    import asyncpg

    try:
        connection = await asyncpg.connect(parse_database_url(url).dsn(),
                                           timeout=timeout_seconds)
    except ssl.SSLError as exc:
        return connect_failure(url, exc)
    except Exception:
        return None
    await connection.close()
    return None
