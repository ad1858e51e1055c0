"""Standard Webhooks signing and verification for business services (see :mod:`rms.signing`,
its one home)."""

from rms.domain.secrets import SIGNING_SECRET_PREFIX
from rms.signing import (
    DEFAULT_TOLERANCE_SECONDS,
    HEADER_ID,
    HEADER_SIGNATURE,
    HEADER_TIMESTAMP,
    SignatureError,
    Verified,
    Verifier,
    secret_key,
    sign,
    signed_headers,
)

__all__ = ["DEFAULT_TOLERANCE_SECONDS", "HEADER_ID", "HEADER_SIGNATURE", "HEADER_TIMESTAMP",
           "SIGNING_SECRET_PREFIX", "SignatureError", "Verified", "Verifier", "secret_key", "sign",
           "signed_headers"]
