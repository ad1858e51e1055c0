"""The Kafka record for a message (design section 6, a contract)."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from rms.domain.models import Message

HEADER_MESSAGE_ID = "rms-message-id"
HEADER_APP = "rms-app"
HEADER_DELIVERY = "rms-delivery"
HEADER_CREATED_AT = "rms-created-at"
RESERVED_HEADER_PREFIX = "rms-"


@dataclass(frozen=True, slots=True)
class OutgoingRecord:
    topic: str
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]


def build_record(message: Message, delivery: int) -> OutgoingRecord:
    """Key: the message key, else its id. Value: the JSON payload. Headers: the message's own
    headers plus the ``rms-*`` ones (the API refuses user headers starting with ``rms-``)."""
    headers = [(name, value.encode()) for name, value in message.headers.items()]
    headers += [
        (HEADER_MESSAGE_ID, message.message_id.encode()),
        (HEADER_APP, message.app.encode()),
        (HEADER_DELIVERY, str(delivery).encode()),
        (HEADER_CREATED_AT, rfc3339(message).encode()),
    ]
    return OutgoingRecord(
        topic=message.topic,
        key=(message.key if message.key is not None else message.message_id).encode(),
        value=orjson.dumps(message.payload),
        headers=headers,
    )


def rfc3339(message: Message) -> str:
    return message.created_at.isoformat().replace("+00:00", "Z")


def header(headers: list[tuple[str, bytes]] | tuple[tuple[str, bytes], ...], name: str) -> str | None:
    """The first value of header ``name`` in a consumed record, decoded."""
    for key, value in headers:
        if key == name:
            return value.decode()
    return None
