"""Read-only queries of the bench's messages (asyncpg, the libpq URL) and the consumer's
receipts file. The gates of the worker paths (:mod:`bench.workerpaths`) are the only writes."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import asyncpg

from bench.verify import Stored

STORED = """
SELECT m.message_id, m.state,
       (SELECT count(*) FROM message_events e
         WHERE e.message_id = m.message_id AND e.event = 'published')::int,
       extract(epoch FROM m.created_at)::float8,
       extract(epoch FROM m.confirmed_at)::float8, extract(epoch FROM m.done_at)::float8,
       (SELECT count(*) FROM message_events e
         WHERE e.message_id = m.message_id AND e.event = 'acked')::int
FROM messages m WHERE m.message_id = ANY($1::text[])
"""
DONE = "SELECT count(*) FROM messages WHERE message_id = ANY($1::text[]) AND state = 'done'"

Receipts = dict[str, list[tuple[int, float]]]


async def fetch_stored(dsn: str, ids: Sequence[str]) -> dict[str, Stored]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(STORED, list(ids))
    finally:
        await conn.close()
    return {row[0]: Stored(*row) for row in rows}


async def wait_count(dsn: str, query: str, ids: Sequence[str], want: int,
                     patience: float) -> int:
    """Poll ``query`` (a count over ``ids``) until it reaches ``want`` or ``patience`` seconds
    pass; returns the last count."""
    conn = await asyncpg.connect(dsn)
    deadline, count = time.monotonic() + patience, -1
    try:
        while time.monotonic() < deadline:
            count = int(await conn.fetchval(query, list(ids)))
            if count >= want:
                break
            await asyncio.sleep(0.25)
    finally:
        await conn.close()
    return count


def stored(dsn: str, ids: Sequence[str]) -> dict[str, Stored]:
    return asyncio.run(fetch_stored(dsn, ids))


def wait_done(dsn: str, ids: Sequence[str], timeout: float) -> int:
    return asyncio.run(wait_count(dsn, DONE, ids, len(ids), timeout))


def read_receipts(path: Path, wanted: set[str]) -> Receipts:
    """message id -> ``[(delivery, receive time), ...]`` for the ``wanted`` ids."""
    receipts: Receipts = defaultdict(list)
    if not path.exists():
        return receipts
    with path.open() as lines:
        for line in lines:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 3 and parts[0] in wanted:
                receipts[parts[0]].append((int(parts[1]), float(parts[2])))
    return receipts


def wait_received(path: Path, ids: set[str], delivery: int, timeout: float) -> Receipts:
    """Re-read the receipts until every id arrived with ``delivery`` (or timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        receipts = read_receipts(path, ids)
        arrived = sum(1 for i in ids if any(d == delivery for d, _ in receipts.get(i, ())))
        if arrived >= len(ids) or time.monotonic() > deadline:
            return receipts
        time.sleep(0.2)
