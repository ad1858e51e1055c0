"""The barrier on a real PostgreSQL: a check-back during an open local transaction waits for
its outcome; after a rollback (or before the transaction ever ran) it answers rolled_back and
a late commit of that transaction fails."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import Column, MetaData, Table, Text, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.store.database import open_engine
from rms_client.barrier import Barrier, BarrierClosed

metadata = MetaData()
orders = Table("orders", metadata, Column("order_id", Text, primary_key=True))


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """The producer's own database (a fresh one per test)."""
    engine = open_engine(database_url, pool_size=4)
    async with engine.begin() as conn:
        await conn.run_sync(metadata.create_all)
    yield engine
    await engine.dispose()


@pytest.fixture
async def barrier(engine: AsyncEngine) -> Barrier:
    barrier = Barrier(engine, lock_timeout_seconds=10)
    await barrier.create_table()
    await barrier.create_table()  # idempotent
    return barrier


async def order_count(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(orders))).scalar_one())


async def test_committed_before_the_check(engine: AsyncEngine, barrier: Barrier) -> None:
    async with engine.begin() as conn:
        await barrier.mark_committed(conn, "m1")
        await conn.execute(orders.insert().values(order_id="o1"))
    assert await barrier.check("m1") == "committed"
    assert await barrier.check("m1") == "committed"


@pytest.mark.parametrize("ending", ["commit", "rollback"])
async def test_check_waits_for_an_open_transaction(engine: AsyncEngine, barrier: Barrier,
                                                   ending: str) -> None:
    async with engine.connect() as conn:
        local = await conn.begin()
        await barrier.mark_committed(conn, "m2")
        await conn.execute(orders.insert().values(order_id="o2"))
        check = asyncio.create_task(barrier.check("m2"))
        await asyncio.sleep(0.5)
        assert not check.done()  # "still running", not a guess
        await (local.commit() if ending == "commit" else local.rollback())
        answer = await asyncio.wait_for(check, 5)
    assert answer == ("committed" if ending == "commit" else "rolled_back")
    assert await order_count(engine) == (1 if ending == "commit" else 0)


async def test_late_commit_after_a_rolled_back_answer_fails(engine: AsyncEngine,
                                                            barrier: Barrier) -> None:
    """The producer died after prepare; check-back answers rolled_back (RMS deletes the
    message), so the local transaction, if it runs late after all, must not commit."""
    assert await barrier.check("m3") == "rolled_back"
    with pytest.raises(BarrierClosed, match="already resolved as rolled back"):
        async with engine.begin() as conn:
            await barrier.mark_committed(conn, "m3")
            await conn.execute(orders.insert().values(order_id="o3"))
    assert await order_count(engine) == 0
    assert await barrier.check("m3") == "rolled_back"


async def test_a_rolled_back_transaction_cannot_be_retried_under_the_same_id(
        engine: AsyncEngine, barrier: Barrier) -> None:
    with pytest.raises(RuntimeError):
        async with engine.begin() as conn:
            await barrier.mark_committed(conn, "m4")
            raise RuntimeError("payment declined")
    assert await barrier.check("m4") == "rolled_back"
    with pytest.raises(BarrierClosed):
        async with engine.begin() as conn:
            await barrier.mark_committed(conn, "m4")


async def test_a_wait_past_the_lock_timeout_answers_unknown(engine: AsyncEngine) -> None:
    impatient = Barrier(engine, lock_timeout_seconds=0.2)
    await impatient.create_table()
    async with engine.connect() as conn, conn.begin():
        await impatient.mark_committed(conn, "m5")
        assert await impatient.check("m5") == "unknown"
    assert await impatient.check("m5") == "committed"


