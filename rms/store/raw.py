"""Hot statements on the asyncpg driver connection.

A statement is built with Core and compiled once; each execution then goes straight to the
driver (whose own prepared-statement cache keeps it prepared per connection) and rows become
domain records without Core's result processing. Its binds are values asyncpg encodes as they
are (text, numbers, booleans, arrays of them); a constant JSON object is bound as text and
cast by PostgreSQL (:func:`rms.store.transitions.jsonb`), so no Core bind processing is
needed. On the redelivery benchmark this takes a
1000-row recovery claim from about 150 ms to about 100 ms of a loaded 2-CPU machine. Use it for
statements that run per batch at high rates; everything else stays plain Core.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.util import greenlet_spawn


class RawStatement:
    """``statement`` compiled for the engine's dialect; binds are given by name, the ones not
    given keep the values they were built with."""

    def __init__(self, statement: ClauseElement, dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        if not isinstance(compiled, SQLCompiler):
            raise TypeError(f"{type(statement).__name__} does not compile to SQL")
        self.sql = str(compiled)
        self._names: Sequence[str] = compiled.positiontup or []
        self._values: dict[str, Any] = dict(compiled.params)

    def args(self, **values: Any) -> list[Any]:
        merged = self._values | values
        return [merged[name] for name in self._names]

    async def fetch(self, engine: AsyncEngine, **values: Any) -> list[Any]:
        """Run in autocommit (one statement is atomic on its own); returns asyncpg records."""
        async with driver_connection(engine) as driver:
            rows: list[Any] = await driver.fetch(self.sql, *self.args(**values))
        return rows


async def driver_of(conn: Any) -> Any:
    """The asyncpg connection under an SQLAlchemy ``AsyncConnection``."""
    raw = await conn.get_raw_connection()
    return raw.driver_connection


def item_specific(exc: Exception) -> bool:
    """An error PostgreSQL raised for the statement's data (a refused value, a constraint, a
    deadlock with another batch): worth retrying the items one by one. A lost or refused
    connection, or no pooled connection in time, is not."""
    connection_level = (asyncpg.PostgresConnectionError,
                        asyncpg.exceptions.OperatorInterventionError,
                        asyncpg.exceptions.InsufficientResourcesError)
    return isinstance(exc, asyncpg.PostgresError) and not isinstance(exc, connection_level)


@asynccontextmanager
async def driver_connection(engine: AsyncEngine) -> AsyncIterator[Any]:
    """A pooled connection's asyncpg connection. After anything but an error PostgreSQL
    reported for the statement (which leaves the connection usable), the connection is
    invalidated: lost, cancelled mid-operation or in an unknown protocol state, it must never
    be handed out again.

    Taken from the pool as a raw connection (``Engine.raw_connection``: the same checkout,
    events and error translation) rather than through an ``AsyncConnection``, which would add
    a ``Connection`` object, a greenlet switch to reach the driver and a task to close it:
    together they cost a checkout about twice the CPU, on every statement of the request
    path. Returning it needs no I/O (no reset on return) except when the pool closes an
    overflow connection; a cancellation then aborts that connection, which is what closing
    it meant."""
    pooled = await _checkout(engine)
    try:
        driver: Any = pooled.driver_connection
        try:
            yield driver
        except BaseException as exc:
            if driver.is_closed() or not (isinstance(exc, Exception) and item_specific(exc)):
                await greenlet_spawn(pooled.invalidate, exc)
            raise
    finally:
        await greenlet_spawn(pooled.close)


async def _checkout(engine: AsyncEngine) -> Any:
    """A raw pooled connection. A connection that cannot be made raises what a checkout
    through ``engine.connect()`` raises (a :class:`sqlalchemy.exc.DBAPIError` marked
    invalidated when it is a disconnect), so the request path's error answers (503 for a
    database that is down or restarting) and the workers' outage rules read it alike."""
    dialect = engine.sync_engine.dialect
    try:
        return await greenlet_spawn(engine.sync_engine.raw_connection)
    except dialect.loaded_dbapi.Error as exc:
        raise DBAPIError.instance(
            None, None, exc, dialect.loaded_dbapi.Error, dialect=dialect,
            connection_invalidated=dialect.is_disconnect(exc, None, None)) from exc
