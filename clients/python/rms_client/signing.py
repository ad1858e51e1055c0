"""Standard Webhooks signatures (https://www.standardwebhooks.com), the one home for every side:
the confirm service signs each check-back call and the producer SDK verifies it; the consumer
SDK signs each ack record and the ack consumer verifies it. One implementation, so the sides
can never drift apart.

Signed content is ``f"{webhook_id}.{timestamp}.{body}"``; the signature header carries one or
more space-separated ``v1,<base64 HMAC-SHA256>`` entries (several during a secret rotation).
Pure standard library: importable by any business service.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

SIGNING_SECRET_PREFIX = "whsec_"  # noqa: S105 - a prefix, not a secret

HEADER_ID = "webhook-id"
HEADER_TIMESTAMP = "webhook-timestamp"
HEADER_SIGNATURE = "webhook-signature"
DEFAULT_TOLERANCE_SECONDS = 300


class SignatureError(ValueError):
    """The request is not provably from RMS: missing headers, bad signature or stale timestamp."""


def secret_key(secret: str) -> bytes:
    """The HMAC key of a ``whsec_<base64>`` secret (the prefix is optional, as in the spec)."""
    encoded = secret.removeprefix(SIGNING_SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded, validate=True)
    except binascii.Error as exc:
        raise ValueError("a signing secret is 'whsec_' followed by base64") from exc
    if not key:
        raise ValueError("a signing secret must not be empty")
    return key


def sign(secret: str, webhook_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<signature>`` entry for ``body``."""
    content = f"{webhook_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signed_headers(secrets: Sequence[str], webhook_id: str, body: bytes,
                   timestamp: int | None = None) -> dict[str, str]:
    """The three Standard Webhooks headers, signed with every secret given (current first), so
    a receiver that knows either side of a rotation accepts the call."""
    if not secrets:
        raise ValueError("at least one signing secret is needed")
    stamp = int(time.time()) if timestamp is None else timestamp
    signatures = " ".join(sign(secret, webhook_id, stamp, body) for secret in secrets)
    return {HEADER_ID: webhook_id, HEADER_TIMESTAMP: str(stamp), HEADER_SIGNATURE: signatures}


@dataclass(frozen=True, slots=True)
class Verified:
    """What a verified request proved: its id (for replay checks) and when it was signed."""

    webhook_id: str
    timestamp: int


class Verifier:
    """Checks Standard Webhooks headers against any of several secrets (rotation overlap) and a
    timestamp tolerance. Replays within the tolerance are the caller's concern (see
    :mod:`rms_client.checkback`), since remembering ids needs storage."""

    def __init__(self, secrets: Sequence[str],
                 tolerance_seconds: float = DEFAULT_TOLERANCE_SECONDS) -> None:
        if not secrets:
            raise ValueError("at least one signing secret is needed")
        self._keys = [secret_key(secret) for secret in secrets]
        self.tolerance_seconds = tolerance_seconds

    def verify(self, headers: Mapping[str, str], body: bytes, now: float | None = None) -> Verified:
        """Raise SignatureError unless ``body`` carries a valid, fresh signature."""
        webhook_id, stamp, signatures = _required(headers)
        timestamp = _timestamp(stamp)
        current = time.time() if now is None else now
        if abs(current - timestamp) > self.tolerance_seconds:
            raise SignatureError(f"webhook-timestamp {timestamp} is outside the "
                                 f"{self.tolerance_seconds:g}s tolerance")
        content = f"{webhook_id}.{timestamp}.".encode() + body
        expected = [hmac.new(key, content, hashlib.sha256).digest() for key in self._keys]
        for given in _v1_signatures(signatures):
            if any(hmac.compare_digest(given, digest) for digest in expected):
                return Verified(webhook_id, timestamp)
        raise SignatureError("no webhook-signature matches a known signing secret")


def _required(headers: Mapping[str, str]) -> tuple[str, str, str]:
    lowered = {name.lower(): value for name, value in headers.items()}
    values = [lowered.get(name, "") for name in (HEADER_ID, HEADER_TIMESTAMP, HEADER_SIGNATURE)]
    missing = [name for name, value in zip((HEADER_ID, HEADER_TIMESTAMP, HEADER_SIGNATURE),
                                           values, strict=True) if not value]
    if missing:
        raise SignatureError(f"missing header(s): {', '.join(missing)}")
    return values[0], values[1], values[2]


_TIMESTAMP_DIGITS = 12  # Unix seconds up to the year 33658


def _timestamp(value: str) -> int:
    """Unix seconds written as plain decimal digits: anything else (a sign, spaces,
    underscores, hundreds of digits that no float holds) is no timestamp a signer writes."""
    if not (value.isascii() and value.isdigit() and len(value) <= _TIMESTAMP_DIGITS):
        raise SignatureError(f"webhook-timestamp {value[:40]!r} is not unix seconds")
    return int(value)


_MAX_SIGNATURES = 16  # a signer sends one per secret: two during a rotation


def _v1_signatures(header: str) -> list[bytes]:
    """The decodable ``v1`` entries; other versions and garbage are ignored, as the spec asks.
    A header of more entries than any signer sends is refused before any is checked, so a
    record cannot make its verification cost seconds."""
    entries = header.split(maxsplit=_MAX_SIGNATURES)
    if len(entries) > _MAX_SIGNATURES:
        raise SignatureError(f"webhook-signature has more than {_MAX_SIGNATURES} entries")
    found = []
    for entry in entries:
        version, _, encoded = entry.partition(",")
        if version != "v1":
            continue
        try:
            found.append(base64.b64decode(encoded, validate=True))
        except binascii.Error:
            continue
    return found
