"""API keys and signing secrets: generation and hashing (keys are stored only as hashes)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from rms_client.signing import SIGNING_SECRET_PREFIX

API_KEY_PREFIX = "rms_"


def new_api_key() -> str:
    return API_KEY_PREFIX + secrets.token_urlsafe(32)


def new_signing_secret() -> str:
    """A Standard Webhooks secret: ``whsec_`` + base64 of 32 random bytes."""
    return SIGNING_SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def hash_api_key(api_key: str) -> str:
    """API keys carry 256 random bits, so one SHA-256 is a safe, fast, indexable hash."""
    return hashlib.sha256(api_key.encode()).hexdigest()


def same_secret(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())
