"""Ack records on the ack topic (design section 6): ``{"message_id", "consumer", "created_at"}``
signed with the consumer app's signing secret in Standard Webhooks headers, so that writing to
the topic is not enough to finish someone else's message.

An ack applies only to the message instance it was written for: ``created_at`` is the
``rms-created-at`` header of the record being acknowledged, copied as it is, and RMS applies
the ack only to the message with that id *and* that creation time. A message id freed by
retention and used again names a new instance, so an old ack record, replayed or read late,
changes nothing. There is no freshness window: a valid ack stays valid however late it is read
(an ack topic consumed after an outage is still applied).

A record without ``created_at`` (written by a client that predates it) applies when it was
written no earlier than the message was created: its signed ``webhook-timestamp`` (or, for an
unsigned record where signatures are optional, its Kafka timestamp) is at or after the
message's creation second.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import orjson

from rms_client.ids import is_valid_app_name, is_valid_message_id
from rms_client.signing import HEADER_TIMESTAMP, SignatureError, Verifier, signed_headers
from rms_client.timestamps import TimestampError, parse_rfc3339

KafkaHeaders = list[tuple[str, bytes]]
Rejection = Literal["malformed", "unsigned", "bad-signature", "unknown-consumer",
                    "not-permitted-or-unknown", "stale"]


def ack_value(message_id: str, consumer: str, created_at: str | None = None) -> bytes:
    """The value of an ack record; ``created_at`` is the acknowledged record's
    ``rms-created-at`` header exactly as it came."""
    body = {"message_id": message_id, "consumer": consumer}
    if created_at is not None:
        body["created_at"] = created_at
    return orjson.dumps(body)


@dataclass(frozen=True, slots=True)
class AckClaim:
    """What an ack record says: ``consumer`` acknowledges ``message_id``, the instance created
    at ``created_at`` (None in a record from a client that predates the field)."""

    message_id: str
    consumer: str
    created_at: datetime | None = None


def signed_ack_headers(secrets: Sequence[str], value: bytes) -> KafkaHeaders:
    """The three Standard Webhooks headers over the record value exactly as written."""
    headers = signed_headers(secrets, f"ack_{uuid.uuid4().hex}", value)
    return [(name, text.encode()) for name, text in headers.items()]


def parse_ack(value: bytes | None) -> AckClaim | None:
    """The claim of an ack record, or None when malformed. The id and the app name must match
    their patterns, so nothing a record carries reaches a database statement unless it could
    name a real message and app; ``created_at``, when present, must be an RFC 3339 time."""
    try:
        body: Any = orjson.loads(value or b"")
    except orjson.JSONDecodeError:
        return None
    if not isinstance(body, dict):
        return None
    message_id, consumer = body.get("message_id"), body.get("consumer")
    if not (isinstance(message_id, str) and isinstance(consumer, str)):
        return None
    if not (is_valid_message_id(message_id) and is_valid_app_name(consumer)):
        return None
    written = body.get("created_at")
    if written is None:
        return AckClaim(message_id, consumer)
    if not isinstance(written, str):
        return None
    try:
        return AckClaim(message_id, consumer, parse_rfc3339(written))
    except TimestampError:
        return None


@dataclass(frozen=True, slots=True)
class AckRecord:
    value: bytes | None
    headers: Sequence[tuple[str, bytes]]
    timestamp_ms: int | None = None  # the record's Kafka timestamp

    @classmethod
    def of(cls, value: bytes | None, headers: Sequence[tuple[str, bytes | None]] | None,
           timestamp_ms: int | None = None) -> AckRecord:
        """A record as the broker hands it over: a header may have no value (Kafka allows a
        null header value), which reads as empty."""
        return cls(value, [(str(name), raw or b"") for name, raw in headers or ()],
                   timestamp_ms if timestamp_ms is not None and timestamp_ms >= 0 else None)

    def written_at(self) -> float | None:
        """When the record says it was written, in Unix seconds: its ``webhook-timestamp``
        when signed (checked with the signature), else its Kafka timestamp."""
        for name, raw in self.headers if self.signed else ():
            if name.lower() == HEADER_TIMESTAMP:
                try:
                    return float(int(raw))
                except ValueError:
                    return None
        return None if self.timestamp_ms is None else self.timestamp_ms / 1000

    @property
    def signed(self) -> bool:
        return any(name.lower() == "webhook-signature" for name, _ in self.headers)


def signature_problem(record: AckRecord, secrets: Sequence[str], *,
                      required: bool) -> Rejection | None:
    """None when the record may be applied for the app whose ``secrets`` are given."""
    if not record.signed:
        return "unsigned" if required else None
    text_headers = {name: raw.decode("latin-1") for name, raw in record.headers}
    try:
        Verifier(secrets, tolerance_seconds=math.inf).verify(text_headers, record.value or b"")
    except (SignatureError, ValueError, TypeError):  # UnicodeError is a ValueError
        return "bad-signature"
    return None


def written_for(claim: AckClaim, record: AckRecord, created_at: datetime) -> bool:
    """Whether the ack was written for the message instance created at ``created_at``: the
    same creation time, or (a record without it) written no earlier than its creation
    second."""
    if claim.created_at is not None:
        return claim.created_at == created_at
    written = record.written_at()
    return written is not None and written >= math.floor(created_at.timestamp())
