"""The paged listings' parts shared by the operator's reads and the bulk resend: a message
listing's filter as WHERE clauses, and the keyset cursors of messages and transactions (the
``(created_at, id)`` of a page's last row, opaque to the client)."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import ColumnElement, false, func, literal, not_, or_

from rms.domain import phase
from rms.domain.errors import Invalid
from rms.domain.listings import MessageFilter
from rms.store.phase import condition
from rms.store.schema import messages


def encode_key(created_at: datetime, row_id: str) -> str:
    """A keyset cursor: the ``(created_at, id)`` of the last row of a page."""
    raw = orjson.dumps([created_at.isoformat(), row_id])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """The ``(created_at, id)`` of a cursor :func:`encode_key` issued; anything else is
    refused as invalid input."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created, row_id = orjson.loads(base64.urlsafe_b64decode(padded))
        return datetime.fromisoformat(created), str(row_id)
    except (ValueError, TypeError) as exc:
        raise Invalid("cursor is not one this service issued") from exc


def encode_event_cursor(event_id: int) -> str:
    """The cursor of a page of a message's events: the id of its last event."""
    return base64.urlsafe_b64encode(orjson.dumps(["event", event_id])).decode().rstrip("=")


def decode_event_cursor(cursor: str) -> int:
    """The event id of a cursor :func:`encode_event_cursor` issued; anything else is
    refused as invalid input."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        kind, event_id = orjson.loads(base64.urlsafe_b64decode(padded))
        if kind != "event" or not isinstance(event_id, int) or isinstance(event_id, bool):
            raise ValueError(cursor)
        return event_id
    except (ValueError, TypeError) as exc:
        raise Invalid("cursor is not one this service issued") from exc


def message_clauses(where: MessageFilter) -> list[Any]:
    """The WHERE clauses of a message listing's filters."""
    found: list[Any] = []
    if where.state is not None:
        found.append(messages.c.state == where.state.value)
    if where.dead is not None:
        dead = dead_for(where.consumer)
        found.append(dead if where.dead else not_(dead))
    if where.topic is not None:
        found.append(messages.c.topic == where.topic)
    if where.app is not None:
        found.append(messages.c.app == where.app)
    if where.consumer is not None:
        found.append(condition(phase.OWES, messages, {"consumer": literal(where.consumer)}))
    return found


def dead_for(consumer: str | None) -> ColumnElement[bool]:
    """A message is dead (for ``consumer``, when given: also when that consumer's own delivery
    budget is spent while the message goes on for the others, design section 7)."""
    if consumer is None:
        return messages.c.dead
    return or_(messages.c.dead,
               func.coalesce(literal(consumer) == func.any(messages.c.exhausted), false()))
