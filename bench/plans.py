"""The query plans of the hot statements on a database as it is (full or empty):
``EXPLAIN (ANALYZE, BUFFERS)`` of the prepare insert, the confirm and the ack of one new
message, the check-back and redelivery claims, and retention's read of its candidates and its
two deletes, all in one transaction that is rolled back, so nothing changes.

    .venv/bin/python -m bench.plans --database-url postgresql://...

The statements are the store's own (``rms.store.explain``: the golden SQL of ``rms/store/sql``
and the claims as the workers build them) and retention's read (``history.retention``). A plan
that reads ``messages`` or ``message_events`` with a sequential scan is marked ``SEQ SCAN``:
on a table of millions of rows that statement's cost grows with the table, not with its work,
and the command exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from history.retention import CANDIDATES
from rms.store.explain import claim_calls, message_calls, retention_calls

AGE = timedelta(days=30)  # retention's default age
LIMIT = 1000  # the workers' default batch
LEASE_SECONDS = 30.0
LINE_CHARS = 240
_SEQ_SCAN = re.compile(r"Seq Scan on (messages|message_events)\b")
_START = (datetime(1900, 1, 1, tzinfo=UTC), "")


@dataclass(frozen=True)
class Plan:
    name: str
    lines: list[str]

    @property
    def seq_scan(self) -> bool:
        return any(_SEQ_SCAN.search(line) for line in self.lines)

    @property
    def execution_ms(self) -> float:
        for line in self.lines:
            if line.startswith("Execution Time:"):
                return float(line.split()[2])
        return 0.0

    def render(self) -> str:
        verdict = "SEQ SCAN" if self.seq_scan else "indexed"
        return "\n".join([f"== {self.name}: {verdict}, {self.execution_ms:.2f} ms",
                          *self.lines])


def _shortened(line: str) -> str:
    """A plan line with its long literals (a batch's thousand ids) cut."""
    if len(line) <= LINE_CHARS:
        return line
    return f"{line[:LINE_CHARS]}... ({len(line):,} characters)"


async def _explain(conn: Any, name: str, sql: str, *args: Any) -> Plan:
    rows = await conn.fetch(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", *args)
    return Plan(name, [_shortened(row[0]) for row in rows])


async def explain_hot_statements(conn: Any) -> list[Plan]:
    """Every hot statement's plan, in one transaction rolled back at the end."""
    app = await conn.fetchval("SELECT name FROM apps ORDER BY name LIMIT 1")
    if app is None:
        raise ValueError("the database has no app: seed it first (python -m bench.seed)")
    message_id = f"plans-{uuid.uuid4().hex}"
    cutoff = await conn.fetchval("SELECT now() - $1::interval", AGE)
    transaction = conn.transaction()
    await transaction.start()
    try:
        calls = message_calls(message_id, app) + claim_calls(LIMIT, LEASE_SECONDS)
        plans = [await _explain(conn, name, sql, *args) for name, sql, args in calls]
        plans += await _retention(conn, cutoff)
    finally:
        await transaction.rollback()
    return plans


async def _retention(conn: Any, cutoff: datetime) -> list[Plan]:
    """Retention's read of a batch and its deletes of that batch's messages and events."""
    ids = [row["message_id"] for row in await conn.fetch(CANDIDATES, cutoff, *_START, LIMIT)]
    plans = [await _explain(conn, "retention-candidates", CANDIDATES, cutoff, *_START, LIMIT)]
    return plans + [await _explain(conn, name, sql, *args)
                    for name, sql, args in retention_calls(ids)]


async def explain(dsn: str) -> list[Plan]:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        return await explain_hot_statements(conn)
    finally:
        await conn.close()


def render(plans: Sequence[Plan]) -> str:
    return "\n\n".join(plan.render() for plan in plans)


def main(argv: list[str] | None = None) -> int:
    import asyncpg

    from history.options import UsageError, database_url
    from rms.store.dburl import parse_database_url

    parser = argparse.ArgumentParser(prog="python -m bench.plans",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--database-url", help="a migrated database (default RMS_DATABASE_URL)")
    args = parser.parse_args(argv)
    try:
        dsn = parse_database_url(database_url(args.database_url)).dsn()
        plans = asyncio.run(explain(dsn))
    except (UsageError, ValueError) as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return 2
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        print(f"{parser.prog}: failed: {exc}", file=sys.stderr)
        return 1
    print(render(plans))
    return 1 if any(plan.seq_scan for plan in plans) else 0


if __name__ == "__main__":
    raise SystemExit(main())
