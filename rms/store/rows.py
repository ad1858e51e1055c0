"""Row to domain-record mapping, in one place: columns are read by name."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import Row

from rms.domain.models import App, ConsumerAck, Message, MessageEvent
from rms.domain.states import DeadReason, State
from rms_client.trace import stored

_STATES = {state.value: state for state in State}
_REASONS = {reason.value: reason for reason in DeadReason}


def instant(value: datetime | None) -> datetime | None:
    """A stored time as an aware UTC datetime. asyncpg writes the exact instants
    0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z as ``-infinity`` / ``infinity`` and
    reads those back as naive ``datetime.min`` / ``datetime.max``: they mean the same instants
    (they sort the same in SQL), so they are read as those instants in UTC."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def message_from(m: Any) -> Message:
    """A Message from anything that reads ``messages`` columns by name: an asyncpg Record
    (JSONB columns arrive decoded: the engine's asyncpg codecs do that) or a Core row's
    mapping."""
    reason = m["dead_reason"]
    return Message(
        message_id=m["message_id"],
        app=m["app"],
        topic=m["topic"],
        key=m["key"],
        payload=m["payload"],
        headers=dict(m["headers"] or {}),
        check_url=m["check_url"],
        state=_STATES[m["state"]],
        dead=m["dead"],
        dead_reason=_REASONS[reason] if reason else None,
        check_count=m["check_count"],
        delivery_count=m["delivery_count"],
        delivery_base=m["delivery_base"],
        check_after_seconds=m["check_after_seconds"],
        max_checks=m["max_checks"],
        ack_timeout_seconds=m["ack_timeout_seconds"],
        max_deliveries=m["max_deliveries"],
        created_at=m["created_at"],
        confirmed_at=m["confirmed_at"],
        done_at=m["done_at"],
        deleted_at=m["deleted_at"],
        next_check_at=m["next_check_at"],
        next_delivery_at=m["next_delivery_at"],
        claim_token=m["claim_token"],
        deliver_after=instant(m["deliver_after"]),
        trace=stored(m["traceparent"], m["tracestate"]),
        ordered=m["ordered"],
        confirm_seq=m["confirm_seq"],
        transaction_id=m["transaction_id"],
        publish_failure=m["publish_failure"],
        published_delivery=m["published_delivery"],
        subscribers=None if m["subscribers"] is None else tuple(m["subscribers"]),
        acks=acks_from(m["acks"]),
        exhausted=tuple(m["exhausted"] or ()),
    )


def acks_from(stored: Any) -> dict[str, ConsumerAck]:
    """The ``acks`` column (``{"<app>": {"at": <RFC 3339>, "via": ...}}``, NULL before the first
    ack; asyncpg hands JSONB over decoded, a Core row as text or decoded) by consumer."""
    if stored is None:
        return {}
    found = orjson.loads(stored) if isinstance(stored, str | bytes) else stored
    return {name: ConsumerAck(datetime.fromisoformat(ack["at"]), ack["via"])
            for name, ack in found.items()}


def to_message(row: Row[Any]) -> Message:
    return message_from(row._mapping)


def to_app(row: Row[Any]) -> App:
    return app_from(row._mapping)


def app_from(m: Mapping[Any, Any]) -> App:
    """An app from its columns (a Core row's mapping or an asyncpg record)."""
    return App(
        name=m["name"],
        produce_topics=tuple(m["produce_topics"]),
        consume_topics=tuple(m["consume_topics"]),
        check_url_prefixes=tuple(m["check_url_prefixes"]),
        default_check_url=m["default_check_url"],
        signing_secret=m["signing_secret"],
        previous_signing_secret=m["previous_signing_secret"],
        created_at=m["created_at"],
        key_rotated_at=m["key_rotated_at"],
        previous_signing_secret_expires_at=m.get("previous_signing_secret_expires_at"),
        ordered_topics=tuple(m.get("ordered_topics") or ()),
        max_deliveries=m.get("max_deliveries"),
        ack_timeout_seconds=m.get("ack_timeout_seconds"),
        last_ack_at=m.get("last_ack_at"),
    )


def to_event(row: Row[Any]) -> MessageEvent:
    m = row._mapping
    return MessageEvent(at=m["at"], event=m["event"], actor=m["actor"], detail=dict(m["detail"]))
