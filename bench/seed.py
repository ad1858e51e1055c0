"""A database that has been in production for months: ``messages`` finished (``done``) messages
with their four events each (prepared, confirmed, published, acked), spread evenly over
``months`` up to an hour ago, across ``apps`` apps and four topics each, written by
``INSERT ... SELECT generate_series`` in chunks of ``CHUNK`` messages, then ``VACUUM (ANALYZE)``
and a checkpoint, as autovacuum would have left a database months old.

    .venv/bin/python -m bench.seed --database-url postgresql://... --messages 5000000

The indexes are kept while inserting (``--rebuild-indexes`` drops the secondary ones first
and builds them again after, which the operations guide compares). Prints the time taken and
the size of each table and of its indexes, per message.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from dataclasses import dataclass
from typing import Any

SEED_APPS = 5
TOPICS_PER_APP = 4
CHUNK = 250_000
PREFIX = "seed-"
TABLES = ("messages", "message_events")

_APPS = """
INSERT INTO apps (name, api_key_hash, signing_secret, produce_topics, consume_topics)
SELECT 'seed-app' || a, 'seed-key-hash-' || a, 'seed-secret', ARRAY['seed.*'], ARRAY['seed.*']
FROM generate_series(0, $1 - 1) AS a
ON CONFLICT DO NOTHING
"""
# message i of n was created (n - i) / n of the span before an hour ago; confirmed 40-90 ms
# after it, published 5 ms after that, acked 150-400 ms after the publish
_ROWS = """
SELECT $7::text || i AS message_id, 'seed-app' || (i % $3::bigint) AS app,
       'seed.app' || (i % $3::bigint) || '.topic' || (i / $3::bigint % $5::bigint) AS topic,
       now() - interval '1 hour' - ($4::float8 * ($2::bigint - i) / $2::bigint)
           * interval '1 second' AS created_at,
       (40 + i % 50) * interval '1 millisecond' AS to_confirm,
       (155 + i % 250) * interval '1 millisecond' AS to_ack, i
FROM generate_series($1::bigint, $6::bigint) AS i
"""
_MESSAGES = f"""
INSERT INTO messages (message_id, app, topic, key, payload, check_url, state, check_count,
    delivery_count, check_after_seconds, max_checks, ack_timeout_seconds, max_deliveries,
    created_at, confirmed_at, done_at, published_delivery)
SELECT r.message_id, r.app, r.topic, 'customer-' || (r.i % 100000),
    jsonb_build_object('order_id', r.i, 'customer', 'customer-' || (r.i % 100000),
                       'total', round((r.i % 50000) / 100.0, 2), 'currency', 'EUR',
                       'items', (r.i % 7) + 1),
    'https://orders.internal/rms/check', 'done', 0, 1, 10, 15, 60, 6,
    r.created_at, r.created_at + r.to_confirm, r.created_at + r.to_confirm + r.to_ack, 1
FROM ({_ROWS}) AS r
"""
_EVENTS = f"""
INSERT INTO message_events (message_id, at, event, actor, detail)
SELECT r.message_id, r.created_at + e.after, e.event,
       CASE WHEN e.event IN ('prepared', 'confirmed') THEN 'app:' || r.app
            WHEN e.event = 'published' THEN 'dispatcher' ELSE 'app:consumer' END,
       e.detail
FROM ({_ROWS}) AS r
CROSS JOIN LATERAL (VALUES
    (interval '0', 'prepared', '{{}}'::jsonb),
    (r.to_confirm, 'confirmed', '{{}}'::jsonb),
    (r.to_confirm + interval '5 milliseconds', 'published', '{{"delivery": 1}}'::jsonb),
    (r.to_confirm + r.to_ack, 'acked', '{{"delivery": 1}}'::jsonb)) AS e(after, event, detail)
"""
_SECONDARY_INDEXES = """
SELECT i.indexname, i.indexdef FROM pg_indexes AS i
JOIN pg_class AS c ON c.relname = i.indexname
JOIN pg_index AS x ON x.indexrelid = c.oid
WHERE i.schemaname = current_schema() AND i.tablename = ANY($1::text[]) AND NOT x.indisprimary
ORDER BY i.indexname
"""
_SIZES = """
SELECT pg_relation_size(c.oid) AS heap, pg_indexes_size(c.oid) AS indexes,
       pg_total_relation_size(c.oid) AS total
FROM pg_class AS c WHERE c.oid = to_regclass($1)
"""


@dataclass(frozen=True)
class TableSize:
    table: str
    heap: int  # bytes of the table itself
    indexes: int  # bytes of all its indexes
    total: int  # with TOAST


@dataclass(frozen=True)
class Seeded:
    messages: int
    seconds: float
    sizes: list[TableSize]

    def render(self) -> str:
        per = max(self.messages, 1)
        lines = [f"seeded {self.messages:,} done messages and {4 * self.messages:,} events in "
                 f"{self.seconds:.1f} s"]
        for s in self.sizes:
            lines.append(f"  {s.table}: table {_mib(s.heap)}, indexes {_mib(s.indexes)}, total "
                         f"{_mib(s.total)} ({s.heap / per:,.0f} + {s.indexes / per:,.0f} bytes "
                         "a message)")
        return "\n".join(lines)


def _mib(size: int) -> str:
    return f"{size / 2**20:,.1f} MiB"


async def table_sizes(conn: Any) -> list[TableSize]:
    """Heap, index and total size of ``messages`` and ``message_events``."""
    sizes = []
    for table in TABLES:
        row = await conn.fetchrow(_SIZES, table)
        sizes.append(TableSize(table, row["heap"], row["indexes"], row["total"]))
    return sizes


async def _insert(conn: Any, messages: int, months: float, apps: int, prefix: str) -> None:
    span = months * 30 * 86_400
    for first in range(1, messages + 1, CHUNK):
        last = min(messages, first + CHUNK - 1)
        args = (first, messages, apps, span, TOPICS_PER_APP, last, prefix)
        async with conn.transaction():
            await conn.execute(_MESSAGES, *args)
            await conn.execute(_EVENTS, *args)


async def seed(dsn: str, messages: int, *, months: float = 6.0, apps: int = SEED_APPS,
               rebuild_indexes: bool = False, prefix: str = PREFIX) -> Seeded:
    """Seeds a migrated database (see the module documentation); returns the time and sizes.
    Message ids are ``prefix`` and a number from 1: seed again with another prefix."""
    import asyncpg

    started = time.monotonic()
    conn = await asyncpg.connect(dsn, command_timeout=None)
    try:
        await conn.execute("SET synchronous_commit = off")
        await conn.execute(_APPS, apps)
        indexes = await conn.fetch(_SECONDARY_INDEXES, list(TABLES)) if rebuild_indexes else []
        for row in indexes:
            await conn.execute(f'DROP INDEX "{row["indexname"]}"')
        await _insert(conn, messages, months, apps, prefix)
        for row in indexes:
            await conn.execute(row["indexdef"])
        # months in production: autovacuum has long visited every page (visibility map and
        # hint bits set); left to run during the measurement, its first pass over gigabytes of
        # fresh rows would be measured instead
        await conn.execute("VACUUM (ANALYZE) messages, message_events")
        # a checkpoint needs pg_checkpoint: without it, the server's own comes in time
        with contextlib.suppress(asyncpg.InsufficientPrivilegeError):
            await conn.execute("CHECKPOINT")
        seconds = time.monotonic() - started
        return Seeded(messages, seconds, await table_sizes(conn))
    finally:
        await conn.close()


def main(argv: list[str] | None = None) -> int:
    import asyncpg

    from history.options import UsageError, database_url, positive_float, positive_int
    from rms.store.dburl import parse_database_url

    parser = argparse.ArgumentParser(prog="python -m bench.seed",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--database-url", help="a migrated database (default RMS_DATABASE_URL)")
    parser.add_argument("--messages", type=positive_int, default=5_000_000,
                        help="done messages to add (default 5000000)")
    parser.add_argument("--months", type=positive_float, default=6.0,
                        help="months they are spread over, up to an hour ago (default 6)")
    parser.add_argument("--apps", type=positive_int, default=SEED_APPS, help="apps (default 5)")
    parser.add_argument("--rebuild-indexes", action="store_true",
                        help="drop the secondary indexes while inserting, build them after")
    args = parser.parse_args(argv)
    try:
        dsn = parse_database_url(database_url(args.database_url)).dsn()
    except UsageError as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return 2
    try:
        seeded = asyncio.run(seed(dsn, args.messages, months=args.months, apps=args.apps,
                                  rebuild_indexes=args.rebuild_indexes))
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        print(f"{parser.prog}: failed: {exc}", file=sys.stderr)
        return 1
    print(seeded.render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
