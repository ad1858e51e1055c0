"""The Kafka record for a message (design section 6, a contract)."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from rms.domain.models import Message
from rms.domain.phase import awaiting
from rms_client.timestamps import format_rfc3339
from rms_client.trace import TRACEPARENT, TRACESTATE, TraceContext

HEADER_MESSAGE_ID = "rms-message-id"
HEADER_APP = "rms-app"
HEADER_DELIVERY = "rms-delivery"
HEADER_CREATED_AT = "rms-created-at"
# the subscribers that had not acked when the record was published (comma-separated; only on
# the records of a message with subscribers, design section 6)
HEADER_AWAITING = "rms-awaiting"
RESERVED_HEADER_PREFIX = "rms-"


@dataclass(frozen=True, slots=True)
class OutgoingRecord:
    topic: str
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]


def build_record(message: Message, delivery: int,
                 trace: TraceContext | None = None) -> OutgoingRecord:
    """Key: the message key, else its id. Value: the JSON payload. Headers: the message's own
    headers plus the ``rms-*`` ones (the API refuses user headers starting with ``rms-``) and,
    when the record carries a trace context (``trace``, else the message's own), the W3C
    ``traceparent`` / ``tracestate``, which then replace message headers of those names."""
    carried = trace or message.trace
    headers = [(name, value.encode()) for name, value in message.headers.items()
               if carried is None or name.lower() not in _TRACE_HEADERS]
    if carried is not None:
        headers += [(name, value.encode()) for name, value in carried.headers().items()]
    headers += [
        (HEADER_MESSAGE_ID, message.message_id.encode()),
        (HEADER_APP, message.app.encode()),
        (HEADER_DELIVERY, str(delivery).encode()),
        (HEADER_CREATED_AT, rfc3339(message).encode()),
    ]
    owed = awaiting(message)
    if owed is not None:  # a consumer whose own budget is spent is no longer awaited
        awaited = [name for name in owed if name not in message.exhausted]
        headers.append((HEADER_AWAITING, ",".join(awaited).encode()))
    return OutgoingRecord(
        topic=message.topic,
        key=(message.key if message.key is not None else message.message_id).encode(),
        value=orjson.dumps(message.payload),
        headers=headers,
    )


_TRACE_HEADERS = frozenset({TRACEPARENT, TRACESTATE})


def rfc3339(message: Message) -> str:
    return format_rfc3339(message.created_at)


def header(headers: list[tuple[str, bytes]] | tuple[tuple[str, bytes], ...], name: str) -> str | None:
    """The first value of header ``name`` in a consumed record, decoded."""
    for key, value in headers:
        if key == name:
            return value.decode()
    return None
