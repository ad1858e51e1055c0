"""Retention's writes to the live tables, for ``rms retention run`` (:mod:`history.retention`),
which reads and archives the rows and calls these to remove them. Each runs one statement of
:mod:`rms.store.retention_sql` on the caller's asyncpg connection (in its transaction).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from rms.store.retention_sql import (
    DELETE_ARCHIVED_EVENTS,
    DELETE_EVENTS,
    DELETE_MESSAGES,
    DELETE_TRANSACTIONS,
    FINISHED,
    delete_late_events,
)

__all__ = ["FINISHED", "delete_events", "delete_finished_messages", "delete_transactions",
           "take_late_events"]


def _count(status: str) -> int:
    """The row count of a command status (``DELETE 3``)."""
    return int(status.split()[-1])


async def delete_finished_messages(conn: Any, message_ids: Sequence[str]) -> list[str]:
    """Delete the messages of ``message_ids`` that are finished and not dead; their ids."""
    return [row["message_id"] for row in await conn.fetch(DELETE_MESSAGES, list(message_ids))]


async def delete_events(conn: Any, message_ids: Sequence[str], event_ids: Sequence[int], *,
                        archived: bool) -> int:
    """Delete the events of the deleted messages and the journaled orphans ``event_ids``
    (``archived``: only the events among ``event_ids``, every one of them archived). Returns
    how many went."""
    sql = DELETE_ARCHIVED_EVENTS if archived else DELETE_EVENTS
    return _count(await conn.execute(sql, list(message_ids), list(event_ids)))


async def take_late_events(conn: Any, message_ids: Sequence[str], event_ids: Sequence[int],
                           returning: str) -> list[Any]:
    """Delete the events of the deleted messages written after their batch was read (not
    among ``event_ids``), returning ``returning`` of each, to be archived before the
    commit."""
    return list(await conn.fetch(delete_late_events(returning), list(message_ids),
                                 list(event_ids)))


async def delete_transactions(conn: Any, cutoff: datetime) -> int:
    """Delete the transactions finished before ``cutoff`` whose messages are all gone."""
    return _count(await conn.execute(DELETE_TRANSACTIONS, cutoff))
