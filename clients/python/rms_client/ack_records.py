"""Ack records on the ack topic (design section 6): ``{"message_id", "consumer", "created_at"}``
signed with the consumer app's signing secret in Standard Webhooks headers, so that writing to
the topic is not enough to finish someone else's message.

An ack applies only to the message instance it was written for: ``created_at`` is the
``rms-created-at`` header of the record being acknowledged, copied as it is, and RMS applies
the ack only to the message with that id *and* that creation time. A message id freed by
retention and used again names a new instance, so an old ack record, replayed or read late,
changes nothing. There is no freshness window: a valid ack stays valid however late it is read
(an ack topic consumed after an outage is still applied). A record without ``created_at``
names no instance and is refused (``missing-created-at``).

Judging a record is total: :func:`claim_of` and :func:`signature_problem` return a reason for
whatever a record holds (``unreadable`` for anything their checks did not foresee) and never
raise, so one record cannot stop the loop that reads the topic.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeVar

import orjson

from rms_client.ids import is_valid_app_name, is_valid_message_id
from rms_client.signing import SignatureError, Verifier, signed_headers
from rms_client.timestamps import TimestampError, parse_rfc3339

KafkaHeaders = list[tuple[str, bytes]]
Rejection = Literal["malformed", "missing-created-at", "duplicate-header", "unsigned",
                    "bad-signature", "unknown-consumer", "not-permitted-or-unknown", "stale",
                    "unreadable"]
WEBHOOK_HEADER_PREFIX = "webhook-"
_Judged = TypeVar("_Judged")


def ack_value(message_id: str, consumer: str, created_at: str) -> bytes:
    """The value of an ack record; ``created_at`` is the acknowledged record's
    ``rms-created-at`` header exactly as it came (RMS refuses a record without it)."""
    if not created_at:
        raise ValueError(f"an ack record of {message_id!r} needs the acknowledged record's "
                         "rms-created-at (the instance it acknowledges)")
    return orjson.dumps({"message_id": message_id, "consumer": consumer,
                         "created_at": created_at})


@dataclass(frozen=True, slots=True)
class AckClaim:
    """What an ack record says: ``consumer`` acknowledges ``message_id``, the instance created
    at ``created_at``."""

    message_id: str
    consumer: str
    created_at: datetime


def signed_ack_headers(secrets: Sequence[str], value: bytes) -> KafkaHeaders:
    """The three Standard Webhooks headers over the record value exactly as written."""
    headers = signed_headers(secrets, f"ack_{uuid.uuid4().hex}", value)
    return [(name, text.encode()) for name, text in headers.items()]


def parse_ack(value: bytes | None) -> AckClaim | Rejection:
    """The claim of an ack record's value, or why it is none. The id and the app name must
    match their patterns, so nothing a record carries reaches a database statement unless it
    could name a real message and app; ``created_at`` must be an RFC 3339 time."""
    try:
        body: Any = orjson.loads(value or b"")
    except orjson.JSONDecodeError:
        return "malformed"
    if not isinstance(body, dict):
        return "malformed"
    message_id, consumer = body.get("message_id"), body.get("consumer")
    if not (isinstance(message_id, str) and isinstance(consumer, str)):
        return "malformed"
    if not (is_valid_message_id(message_id) and is_valid_app_name(consumer)):
        return "malformed"
    written = body.get("created_at")
    if written is None:
        return "missing-created-at"
    if not isinstance(written, str):
        return "malformed"
    try:
        return AckClaim(message_id, consumer, parse_rfc3339(written))
    except TimestampError:
        return "malformed"


@dataclass(frozen=True, slots=True)
class AckRecord:
    value: bytes | None
    headers: Sequence[tuple[str, bytes]]

    @classmethod
    def of(cls, value: bytes | None,
           headers: Sequence[tuple[str, bytes | None]] | None) -> AckRecord:
        """A record as the broker hands it over: a header may have no value (Kafka allows a
        null header value), which reads as empty."""
        return cls(value, [(str(name), raw or b"") for name, raw in headers or ()])

    @property
    def signed(self) -> bool:
        return any(name.lower() == "webhook-signature" for name, _ in self.headers)

    def duplicates_webhook_header(self) -> bool:
        """Whether a ``webhook-*`` header comes more than once (names compared as Standard
        Webhooks does, ignoring case): the signature covers one header set, and a second
        value beside it could be read in its place."""
        names = [name.lower() for name, _ in self.headers
                 if name.lower().startswith(WEBHOOK_HEADER_PREFIX)]
        return len(names) != len(set(names))


def total(judge: Callable[[], _Judged | Rejection]) -> _Judged | Rejection:
    """``judge()``, or ``unreadable`` when it raises: what a record holds decides that
    record's fate alone, never the loop's."""
    try:
        return judge()
    except Exception:  # whatever a record holds: that record alone is rejected
        return "unreadable"


def claim_of(record: AckRecord) -> AckClaim | Rejection:
    """What ``record`` claims, judged without any app: its value and its headers' shape."""
    def judge() -> AckClaim | Rejection:
        if record.duplicates_webhook_header():
            return "duplicate-header"
        return parse_ack(record.value)
    return total(judge)


def signature_problem(record: AckRecord, secrets: Sequence[str], *,
                      required: bool) -> Rejection | None:
    """None when the record may be applied for the app whose ``secrets`` are given. Every
    signed field (``webhook-id``, ``webhook-timestamp``, the value) is read from the one
    header set the signature is checked over: a record repeating a ``webhook-*`` header is
    refused before it gets here."""
    def judge() -> Rejection | None:
        if record.duplicates_webhook_header():
            return "duplicate-header"
        if not record.signed:
            return "unsigned" if required else None
        text_headers = {name: raw.decode("latin-1") for name, raw in record.headers}
        try:
            Verifier(secrets, tolerance_seconds=math.inf).verify(text_headers,
                                                                 record.value or b"")
        except (SignatureError, ValueError, TypeError):  # UnicodeError is a ValueError
            return "bad-signature"
        return None
    return total(judge)


def written_for(claim: AckClaim, created_at: datetime) -> bool:
    """Whether the ack was written for the message instance created at ``created_at``."""
    return claim.created_at == created_at
