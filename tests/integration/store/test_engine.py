"""The engine's sessions: settings PostgreSQL applies to every RMS connection, and pooled
connections that must never be handed out again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from rms import metrics
from rms.config import Settings
from rms.store.database import _end_leaked_transaction, create_engine
from rms.store.dburl import parse_database_url
from rms.store.raw import driver_connection


async def _show(settings: Settings, name: str) -> str:
    engine = create_engine(settings, pool_size=1)
    try:
        async with engine.connect() as conn:
            return str((await conn.execute(text(f"SHOW {name}"))).scalar_one())
    finally:
        await engine.dispose()


async def test_sessions_idle_in_a_transaction_are_ended_by_the_server(settings: Settings) -> None:
    assert await _show(settings, "idle_in_transaction_session_timeout") == "1min"
    quick = settings.model_copy(update={"db_idle_in_transaction_timeout_seconds": 2.5})
    assert await _show(quick, "idle_in_transaction_session_timeout") == "2500ms"
    never = settings.model_copy(update={"db_idle_in_transaction_timeout_seconds": 0})
    assert await _show(never, "idle_in_transaction_session_timeout") == "0"
    assert await _show(settings, "application_name") == "rms"


async def _leak_a_transaction(engine: AsyncEngine) -> None:
    """Return a pooled connection whose server session is inside a transaction the pool does
    not know of (what a statement cancelled while its ``BEGIN`` was on the wire leaves), with
    a row lock taken in it."""
    async with driver_connection(engine) as driver:
        await driver.execute("BEGIN")
        await driver.execute("UPDATE leak_probe SET v = -1 WHERE id = 1")


async def _autocommit_write_is_committed(engine: AsyncEngine, value: int, dsn: str) -> bool:
    """An autocommit statement on a pooled connection (the group-commit path), then whether
    another session sees it, within a second (a leaked lock would block the write)."""
    async with asyncio.timeout(1.0):
        async with driver_connection(engine) as driver:
            await driver.execute("UPDATE leak_probe SET v = $1 WHERE id = 1", value)
    probe = await asyncpg.connect(dsn)
    try:
        return bool(await probe.fetchval("SELECT v FROM leak_probe WHERE id = 1") == value)
    finally:
        await probe.close()


@pytest.fixture
def probe_dsn(settings: Settings) -> str:
    """Where a second session, outside the engine's pool, connects."""
    return parse_database_url(settings.database_url).dsn()


@pytest.fixture
async def one_connection_engine(settings: Settings) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(settings.model_copy(update={"db_max_overflow": 0}), pool_size=1)
    async with engine.begin() as conn:
        await conn.execute(text("CREATE TABLE leak_probe (id int PRIMARY KEY, v int)"))
        await conn.execute(text("INSERT INTO leak_probe VALUES (1, 0)"))
    yield engine
    await engine.dispose()


async def test_a_connection_returned_inside_a_transaction_is_closed_at_once(
        one_connection_engine: AsyncEngine, probe_dsn: str) -> None:
    await _leak_a_transaction(one_connection_engine)
    assert await _autocommit_write_is_committed(one_connection_engine, 7, probe_dsn)


async def test_a_pooled_connection_inside_a_transaction_is_replaced_at_checkout(
        one_connection_engine: AsyncEngine, probe_dsn: str) -> None:
    pool = one_connection_engine.sync_engine.pool
    event.remove(pool, "checkin", _end_leaked_transaction)  # only the checkout guard left
    before = metrics.DB_CONNECTIONS_DISCARDED.labels("open-transaction")._value.get()
    await _leak_a_transaction(one_connection_engine)
    assert await _autocommit_write_is_committed(one_connection_engine, 8, probe_dsn)
    assert metrics.DB_CONNECTIONS_DISCARDED.labels("open-transaction")._value.get() == before + 1
