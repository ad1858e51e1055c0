"""Standard Webhooks signing and verification (pure functions)."""

from __future__ import annotations

import base64

import pytest

from rms.domain.secrets import new_signing_secret
from rms_client.signing import SignatureError, Verifier, sign, signed_headers

# the example of the Standard Webhooks specification
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_TIMESTAMP = 1614265330
SPEC_BODY = b'{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
NOW = float(SPEC_TIMESTAMP + 10)


def test_matches_the_specification_example() -> None:
    assert sign(SPEC_SECRET, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY) == SPEC_SIGNATURE
    headers = {"webhook-id": SPEC_ID, "webhook-timestamp": str(SPEC_TIMESTAMP),
               "webhook-signature": SPEC_SIGNATURE}
    verified = Verifier([SPEC_SECRET]).verify(headers, SPEC_BODY, now=NOW)
    assert (verified.webhook_id, verified.timestamp) == (SPEC_ID, SPEC_TIMESTAMP)


def test_round_trip_with_rotation_overlap() -> None:
    old, new = new_signing_secret(), new_signing_secret()
    both = signed_headers([new, old], "msg_1", b"{}", timestamp=SPEC_TIMESTAMP)
    assert len(both["webhook-signature"].split()) == 2
    for secret in (old, new):
        Verifier([secret]).verify(both, b"{}", now=NOW)
    only_new = signed_headers([new], "msg_2", b"{}", timestamp=SPEC_TIMESTAMP)
    Verifier([old, new]).verify(only_new, b"{}", now=NOW)


def test_secret_without_prefix_is_accepted() -> None:
    bare = SPEC_SECRET.removeprefix("whsec_")
    assert sign(bare, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY) == SPEC_SIGNATURE


@pytest.mark.parametrize(("change", "message"), [
    ({"webhook-signature": "v1," + base64.b64encode(b"x" * 32).decode()}, "no webhook-signature"),
    ({"webhook-signature": "v2," + SPEC_SIGNATURE[3:]}, "no webhook-signature"),
    ({"webhook-signature": "v1,not-base64!"}, "no webhook-signature"),
    ({"webhook-id": "msg_other"}, "no webhook-signature"),
    ({"webhook-timestamp": str(SPEC_TIMESTAMP - 301)}, "outside the 300s tolerance"),
    ({"webhook-timestamp": str(SPEC_TIMESTAMP + 311)}, "outside the 300s tolerance"),
    ({"webhook-timestamp": "yesterday"}, "not unix seconds"),
    ({"webhook-id": ""}, "missing header(s): webhook-id"),
])
def test_rejects(change: dict[str, str], message: str) -> None:
    headers = {"webhook-id": SPEC_ID, "webhook-timestamp": str(SPEC_TIMESTAMP),
               "webhook-signature": SPEC_SIGNATURE} | change
    with pytest.raises(SignatureError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Verifier([SPEC_SECRET]).verify(headers, SPEC_BODY, now=NOW)


def test_rejects_a_tampered_body_and_a_wrong_secret() -> None:
    headers = {"webhook-id": SPEC_ID, "webhook-timestamp": str(SPEC_TIMESTAMP),
               "webhook-signature": SPEC_SIGNATURE}
    with pytest.raises(SignatureError):
        Verifier([SPEC_SECRET]).verify(headers, SPEC_BODY + b" ", now=NOW)
    with pytest.raises(SignatureError):
        Verifier([new_signing_secret()]).verify(headers, SPEC_BODY, now=NOW)


def test_bad_secrets_are_refused_early() -> None:
    with pytest.raises(ValueError, match="base64"):
        Verifier(["whsec_%%%"])
    with pytest.raises(ValueError, match="at least one"):
        Verifier([])
