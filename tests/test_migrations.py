"""The Alembic migrations build, from an empty database, exactly the schema the code uses."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from rms.embedded import EmbeddedPostgres
from rms.store.migrate import upgrade
from rms.store.schema import metadata


def _diff(url: str) -> list[Any]:
    async def run() -> list[Any]:
        engine = create_async_engine(url)
        try:
            async with engine.connect() as conn:
                return await conn.run_sync(_compare)
        finally:
            await engine.dispose()

    return asyncio.run(run())


def _compare(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, metadata))


def test_upgrade_from_empty_matches_models(postgres: EmbeddedPostgres) -> None:
    name = f"m_{uuid.uuid4().hex[:12]}"
    postgres.create_database(name)
    upgrade(postgres.url(name))
    assert _diff(postgres.url(name)) == []
    tables = postgres.psql("SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables "
                           "WHERE schemaname = 'public'", name).strip()
    assert tables == "alembic_version,apps,message_events,messages,transactions"


def test_due_work_uses_partial_indexes(postgres: EmbeddedPostgres) -> None:
    name = f"m_{uuid.uuid4().hex[:12]}"
    postgres.create_database(name)
    upgrade(postgres.url(name))
    plan = postgres.psql(
        "SET enable_seqscan = off; EXPLAIN SELECT message_id FROM messages "
        "WHERE state = 'pending-send' AND NOT dead AND next_check_at <= now() "
        "ORDER BY next_check_at LIMIT 100 FOR UPDATE SKIP LOCKED", name)
    assert "messages_due_checks" in plan
    plan = postgres.psql(
        "SET enable_seqscan = off; EXPLAIN SELECT message_id FROM messages "
        "WHERE state = 'sent' AND NOT dead AND next_delivery_at <= now() "
        "ORDER BY next_delivery_at LIMIT 100 FOR UPDATE SKIP LOCKED", name)
    assert "messages_due_deliveries" in plan
