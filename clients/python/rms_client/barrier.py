"""A check-back barrier for SQLAlchemy on PostgreSQL (DTM's idea), so a producer's check-back
never has to answer an ambiguous ``unknown``.

The local transaction inserts a row ``(message_id, 'committed')`` into the barrier table,
first thing. The check-back does an insert-if-absent of ``(message_id, 'rolled_back')``:

* the local transaction committed: the row is there, the answer is ``committed``;
* it is still open: the insert waits on the open transaction's uncommitted row (a unique-index
  wait) and then answers whatever happened: ``committed`` after its commit, ``rolled_back``
  after its rollback;
* it rolled back, or never started (the producer died after prepare): the insert succeeds,
  the answer is ``rolled_back`` and stays true, because the late local transaction's own
  insert now fails (:class:`BarrierClosed`) and takes the transaction down with it.

A wait longer than ``lock_timeout_seconds`` answers ``unknown`` (RMS asks again later).

Usage::

    barrier = Barrier(engine)            # the producer's own database
    await barrier.create_table()         # or add barrier_table(metadata) to your migrations

    async with engine.begin() as conn:   # the local transaction
        await barrier.mark_committed(conn, message_id)   # first statement
        await conn.execute(...)

    app.include_router(checkback_router(barrier.resolve, secrets=[...],
                                        resolve_transaction=barrier.resolve_transaction))

A transaction of several messages is marked the same way, by its transaction id:
``await barrier.mark_committed(conn, transaction_id)``.
"""

from __future__ import annotations

from sqlalchemy import Column, DateTime, MetaData, Table, Text, func, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from rms_client.checkback import CheckRequest, CheckStatus, TransactionCheckRequest

DEFAULT_TABLE = "rms_barrier"
COMMITTED: CheckStatus = "committed"
ROLLED_BACK: CheckStatus = "rolled_back"
LOCK_NOT_AVAILABLE = "55P03"


class BarrierClosed(RuntimeError):
    """Check-back already answered ``rolled_back`` for this message: the local transaction
    must not commit (RMS has deleted the message, so it will never be delivered)."""


def barrier_table(metadata: MetaData | None = None, name: str = DEFAULT_TABLE) -> Table:
    """The barrier table, for your own migrations."""
    return Table(
        name, metadata or MetaData(),
        Column("message_id", Text, primary_key=True),
        Column("outcome", Text, nullable=False),
        Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    )


class Barrier:
    def __init__(self, engine: AsyncEngine, *, table: Table | None = None,
                 lock_timeout_seconds: float = 10.0) -> None:
        if engine.dialect.name != "postgresql":
            raise ValueError("the barrier needs PostgreSQL (it relies on unique-index waits "
                             "and lock_timeout)")
        self._engine = engine
        self._table = table if table is not None else barrier_table()
        self._lock_timeout_ms = max(1, int(lock_timeout_seconds * 1000))

    async def create_table(self) -> None:
        async with self._engine.begin() as conn:
            await conn.run_sync(self._table.create, checkfirst=True)

    async def mark_committed(self, conn: AsyncConnection, message_id: str) -> None:
        """Inside the local transaction, before its other work (so a concurrent check-back
        waits for the outcome). Raises BarrierClosed if check-back already said rolled_back;
        the transaction is then unusable and must roll back (leaving ``async with
        engine.begin()`` by this exception does that)."""
        statement = self._table.insert().values(message_id=message_id, outcome=COMMITTED)
        try:
            await conn.execute(statement)
        except IntegrityError as exc:
            raise BarrierClosed(f"message {message_id!r} was already resolved as rolled back "
                                "by check-back; this transaction must not commit") from exc

    async def check(self, message_id: str) -> CheckStatus:
        """The outcome of ``message_id``'s local transaction, waiting while it is open."""
        async with self._engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="READ COMMITTED")
            try:
                async with conn.begin():
                    return await self._settle(conn, message_id)
            except DBAPIError as exc:
                if getattr(exc.orig, "sqlstate", None) == LOCK_NOT_AVAILABLE:
                    return "unknown"
                raise

    async def resolve(self, check: CheckRequest) -> CheckStatus:
        """A resolver for :func:`rms_client.checkback.checkback_app`
        or :func:`rms_client.checkback_fastapi.checkback_router`."""
        return await self.check(check.message_id)

    async def resolve_transaction(self, check: TransactionCheckRequest) -> CheckStatus:
        """The transaction resolver for :func:`rms_client.checkback.checkback_app`: the local
        transaction marked ``mark_committed(conn, transaction_id)`` (message ids and
        transaction ids share the barrier table, so keep them distinct)."""
        return await self.check(check.transaction_id)

    async def _settle(self, conn: AsyncConnection, message_id: str) -> CheckStatus:
        await conn.execute(text(f"SET LOCAL lock_timeout = {self._lock_timeout_ms}"))
        closed = (await conn.execute(
            pg_insert(self._table).values(message_id=message_id, outcome=ROLLED_BACK)
            .on_conflict_do_nothing(index_elements=["message_id"])
            .returning(self._table.c.outcome))).first()
        if closed is not None:
            return ROLLED_BACK
        # a new statement, so a new snapshot (READ COMMITTED): it sees the row whose
        # transaction the insert above waited for
        outcome = (await conn.execute(select(self._table.c.outcome).where(
            self._table.c.message_id == message_id))).scalar()
        if outcome == COMMITTED:
            return COMMITTED
        return ROLLED_BACK if outcome == ROLLED_BACK else "unknown"
