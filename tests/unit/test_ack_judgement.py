"""Judging one ack record is a total function: whatever headers and value a record carries
(any names, repeated, of any length, without values; a value that is no JSON, or JSON with
numbers no float holds), :func:`claim_of` and :func:`signature_problem` answer with a claim or
a reason and never raise. Pure functions: property-based, no broker."""

from __future__ import annotations

import time
import typing
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rms_client.ack_records import (
    AckClaim,
    AckRecord,
    Rejection,
    ack_value,
    claim_of,
    signature_problem,
    signed_ack_headers,
)

SECRET = "whsec_" + "QUJD" * 8
REASONS = set(typing.get_args(Rejection))
CREATED = "2026-11-26T08:00:00.123456Z"

_webhook_names = st.sampled_from(["webhook-id", "webhook-timestamp", "webhook-signature",
                                  "Webhook-Timestamp", "WEBHOOK-SIGNATURE", "webhook-"])
_names = st.one_of(_webhook_names, st.text(max_size=40))
_huge_digits = st.integers(min_value=1, max_value=5000).map(lambda n: b"9" * n)
_header_values = st.one_of(st.none(), st.binary(max_size=300), _huge_digits,
                           st.sampled_from([b"-1", b"1e400", b" 12 ", b"1_000", b"\xff\xfe",
                                            b"v1,", b"v1,!!!", "١٢٣".encode()]))
_headers = st.lists(st.tuples(_names, _header_values), max_size=12)
_json_leaves = st.one_of(st.none(), st.booleans(), st.text(max_size=60), st.floats(),
                         st.integers(min_value=-(10**400), max_value=10**400))
_fields = st.fixed_dictionaries({}, optional={
    "message_id": st.one_of(_json_leaves, st.just("m-1"), st.text(min_size=100, max_size=400)),
    "consumer": st.one_of(_json_leaves, st.just("points")),
    "created_at": st.one_of(_json_leaves, st.just(CREATED), st.just("9" * 400))})


def _as_json(body: Any) -> bytes:
    try:
        return orjson.dumps(body)
    except TypeError:  # integers beyond 64 bits: written as the text a hostile writer sends
        return repr(body).encode()


_values = st.one_of(st.none(), st.binary(max_size=400), _fields.map(_as_json),
                    st.sampled_from([b"{", b"[]", b"null", b'"x"', b"1" * 5000,
                                     b'{"message_id": 1e999}', b"\x00" * 10]))


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=_values, headers=_headers, required=st.booleans())
def test_judging_any_record_never_raises(value: bytes | None,
                                         headers: list[tuple[str, bytes | None]],
                                         required: bool) -> None:
    record = AckRecord.of(value, headers)
    claim = claim_of(record)
    assert isinstance(claim, AckClaim) or claim in REASONS
    problem = signature_problem(record, [SECRET], required=required)
    assert problem is None or problem in REASONS


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(extra=_headers, in_front=st.booleans())
def test_a_signed_record_with_any_extra_headers_is_judged_never_raised(
        extra: list[tuple[str, bytes | None]], in_front: bool) -> None:
    value = ack_value("m-1", "points", CREATED)
    signed: list[tuple[str, bytes | None]] = list(signed_ack_headers([SECRET], value))
    record = AckRecord.of(value, extra + signed if in_front else signed + extra)
    expected = claim_of(AckRecord.of(value, []))
    assert isinstance(expected, AckClaim)
    repeated = record.duplicates_webhook_header()
    assert claim_of(record) == ("duplicate-header" if repeated else expected)
    problem = signature_problem(record, [SECRET], required=True)
    assert problem == ("duplicate-header" if repeated else None)  # others are not signed


def test_a_timestamp_of_400_digits_is_a_bad_signature() -> None:
    value = ack_value("m-1", "points", CREATED)
    signed = [(n, raw) for n, raw in signed_ack_headers([SECRET], value)
              if n != "webhook-timestamp"]
    record = AckRecord.of(value, [("webhook-timestamp", b"9" * 400), *signed])
    assert signature_problem(record, [SECRET], required=True) == "bad-signature"


def test_a_repeated_webhook_header_is_refused_whatever_its_case() -> None:
    value = ack_value("m-1", "points", CREATED)
    signed = list(signed_ack_headers([SECRET], value))
    for name in ("webhook-timestamp", "Webhook-Id", "WEBHOOK-SIGNATURE"):
        record = AckRecord.of(value, [(name, b"1"), *signed])
        assert claim_of(record) == "duplicate-header"
        assert signature_problem(record, [SECRET], required=True) == "duplicate-header"
    assert signature_problem(AckRecord.of(value, signed), [SECRET], required=True) is None


def test_a_signature_header_of_thousands_of_entries_is_refused_at_once() -> None:
    """A signer writes one entry per secret; a header of 125,000 entries took a second of the
    API's event loop to check one by one."""
    value = ack_value("m-1", "points", CREATED)
    signed = dict(signed_ack_headers([SECRET, "whsec_" + "REVG" * 8], value))  # a rotation
    assert signature_problem(AckRecord.of(value, list(signed.items())), [SECRET],
                             required=True) is None
    flood = signed | {"webhook-signature": b"v1,AAAA " * 125_000 + signed["webhook-signature"]}
    started = time.perf_counter()
    problem = signature_problem(AckRecord.of(value, list(flood.items())), [SECRET], required=True)
    assert problem == "bad-signature"
    assert time.perf_counter() - started < 0.5
