"""Keyset cursors of the paged listings (messages and transactions): the ``(created_at, id)``
of a page's last row, opaque to the client."""

from __future__ import annotations

import base64
from datetime import datetime

import orjson

from rms.domain.errors import Invalid


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
