"""Ack records on the ack topic (design section 6): ``{"message_id", "consumer"}`` signed with
the consumer app's signing secret in Standard Webhooks headers, so that writing to the topic is
not enough to finish someone else's message.

A valid ack record stays valid however late it is read (an ack topic consumed after an outage
is still applied): there is no timestamp tolerance, and a replayed ack changes nothing, as
acknowledging a ``done`` message is a no-op.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from rms.domain.ids import is_valid_app_name, is_valid_message_id
from rms.signing import SignatureError, Verifier, signed_headers

KafkaHeaders = list[tuple[str, bytes]]
Rejection = Literal["malformed", "unsigned", "bad-signature", "unknown-consumer",
                    "not-permitted-or-unknown"]


def ack_value(message_id: str, consumer: str) -> bytes:
    return orjson.dumps({"message_id": message_id, "consumer": consumer})


def signed_ack_headers(secrets: Sequence[str], value: bytes) -> KafkaHeaders:
    """The three Standard Webhooks headers over the record value exactly as written."""
    headers = signed_headers(secrets, f"ack_{uuid.uuid4().hex}", value)
    return [(name, text.encode()) for name, text in headers.items()]


def parse_ack(value: bytes | None) -> tuple[str, str] | None:
    """``(message_id, consumer)`` from an ack record, or None when malformed. Both must match
    their patterns (a message id, an app name), so nothing a record carries reaches a database
    statement unless it could name a real message and app."""
    try:
        body: Any = orjson.loads(value or b"")
    except orjson.JSONDecodeError:
        return None
    if not isinstance(body, dict):
        return None
    message_id, consumer = body.get("message_id"), body.get("consumer")
    if not (isinstance(message_id, str) and isinstance(consumer, str)):
        return None
    if is_valid_message_id(message_id) and is_valid_app_name(consumer):
        return message_id, consumer
    return None


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
