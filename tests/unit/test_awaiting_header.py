"""The Python consumer's ``rms-awaiting`` rule (design section 6), without a broker or a
database: a record whose header names other apps only is skipped (no handler, no database, no
ack); a record without the header, or with one that cannot be read, is handled; reading the
header never raises. The consumer's app is required, or named by its TopicAcker."""

from __future__ import annotations

from typing import Any, cast

import pytest
from aiokafka import ConsumerRecord
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from rms_client.awaiting import awaiting_of, awaits
from rms_client.consumer import Ack, AckResult, Outcome, RmsConsumer, RmsRecord, TopicAcker
from rms_client.ids import is_valid_app_name

Headers = list[tuple[str, bytes | None]]
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def _headers(*awaiting: bytes | None, message_id: bytes = b"m-1") -> Headers:
    return [("rms-message-id", message_id), ("rms-delivery", b"2"),
            ("rms-created-at", b"2026-11-28T00:00:00.000001Z"),
            *(("rms-awaiting", value) for value in awaiting)]


def _record(headers: Headers, offset: int = 1) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord("orders.paid", 0, offset, 0, 0, b"k", b"{}", None, 1, 1, headers)


@pytest.mark.parametrize(("raw", "names"), [
    (b"points", {"points"}),
    (b"billing,points", {"billing", "points"}),
    (b" billing , points\t", {"billing", "points"}),
    (b"shipping", {"shipping"}),
])
def test_a_readable_header_gives_its_app_names(raw: bytes, names: set[str]) -> None:
    assert awaiting_of(_headers(raw)) == frozenset(names)


@pytest.mark.parametrize("headers", [
    _headers(),  # no header: the single-ack rule
    _headers(b""),
    _headers(b"  "),
    _headers(None),  # Kafka allows a header without a value
    _headers(b"billing,,points"),
    _headers(b"billing,"),
    _headers(b"Billing"),  # not an app name: app names are lowercase
    _headers(b"bill ing"),
    _headers(b"billing\n"),
    _headers(b"\xff\xfebilling"),  # not UTF-8
    _headers(b"billing", b"billing"),  # repeated: which one RMS meant is not known
    _headers(b"billing", b"points"),
], ids=repr)
def test_a_header_that_cannot_be_read_is_not_known(headers: Headers) -> None:
    assert awaiting_of(headers) is None
    assert awaits(awaiting_of(headers), "points")


def test_only_a_readable_header_without_the_app_skips() -> None:
    assert awaits(frozenset({"points", "billing"}), "points")
    assert not awaits(frozenset({"billing"}), "points")
    assert awaits(None, "points")


_header_names = st.one_of(st.just("rms-awaiting"), st.sampled_from(["rms-message-id",
                                                                   "RMS-Awaiting"]),
                          st.text(max_size=20))
_header_values = st.one_of(st.none(), st.binary(max_size=80),
                           st.lists(st.sampled_from(["points", "billing", " ", ",", "", "é",
                                                     "\x00", "a" * 70]), max_size=6)
                           .map(lambda parts: ",".join(parts).encode()))


@settings(max_examples=500, deadline=None)
@given(headers=st.lists(st.tuples(_header_names, _header_values), max_size=6))
def test_reading_any_headers_never_raises_and_skips_only_on_a_clear_list(
        headers: Headers) -> None:
    found = awaiting_of(headers)
    if found is not None:
        values = [raw for name, raw in headers if name == "rms-awaiting"]
        assert len(values) == 1 and found and all(is_valid_app_name(n) for n in found)
        named = {part.strip(" \t") for part in (values[0] or b"").decode().split(",")}
        assert named == found


def test_the_record_reader_keeps_the_header() -> None:
    parsed = RmsRecord.parse(_record(_headers(b"billing")))
    assert parsed is not None and parsed.awaiting == frozenset({"billing"})
    assert not parsed.awaits("points") and parsed.awaits("billing")


class RecordingAcker:
    def __init__(self) -> None:
        self.acked: list[str] = []

    async def ack(self, message_id: str, created_at: str | None = None) -> Ack:
        self.acked.append(message_id)
        return Ack(message_id, AckResult.ACKED, 200)

    async def close(self) -> None:
        return None


class Handled:
    def __init__(self) -> None:
        self.ids: list[str] = []

    async def __call__(self, conn: AsyncConnection, message: RmsRecord) -> None:
        self.ids.append(message.message_id)


class NoDatabase:
    """An engine for tests without a database: every transaction fails as it begins."""

    def begin(self) -> Any:
        raise ConnectionRefusedError("no database in a unit test")


def _consumer(acker: Any, handler: Handled, app: str | None = None) -> RmsConsumer:
    return RmsConsumer(engine=cast(AsyncEngine, NoDatabase()), handler=handler, acker=acker,
                       bootstrap_servers="127.0.0.1:1", group_id="points", topics=["orders.paid"],
                       app=app)


async def test_a_record_awaited_from_others_only_is_skipped_untouched() -> None:
    acker, handler = RecordingAcker(), Handled()
    consumer = _consumer(acker, handler, app="points")
    report = await consumer.handle([_record(_headers(b"billing, shipping"))])
    assert report.outcomes == [("m-1", Outcome.NOT_AWAITED)]
    assert report.count(Outcome.NOT_AWAITED) == 1 and report.skipped == 0
    assert handler.ids == [] and acker.acked == [] and report.acks == []


async def test_a_record_the_consumer_may_not_skip_reaches_the_inbox() -> None:
    """Named, unreadable or absent: the inbox is used (here it has no database, so the outcome
    is FAILED and nothing is acked), never skipped."""
    for headers in (_headers(b"points,billing"), _headers(b"billing", b"billing"),
                    _headers(b"\xffbilling"), _headers()):
        acker, handler = RecordingAcker(), Handled()
        report = await _consumer(acker, handler, app="points").handle([_record(headers)])
        assert report.outcomes == [("m-1", Outcome.FAILED)], headers
        assert acker.acked == []


async def test_in_one_batch_each_record_is_judged_on_its_own_header() -> None:
    """The message's record for this app, then its redelivery for another app: the first
    goes to the inbox (which fails here: no database), the second is skipped."""
    acker, handler = RecordingAcker(), Handled()
    records = [_record(_headers(b"points,billing")), _record(_headers(b"billing"), offset=2)]
    report = await _consumer(acker, handler, app="points").handle(records)
    assert [outcome for _, outcome in report.outcomes] == [Outcome.FAILED, Outcome.NOT_AWAITED]
    assert acker.acked == []


async def test_the_app_is_required_or_named_by_the_topic_acker() -> None:
    with pytest.raises(ValueError, match="needs app="):
        _consumer(RecordingAcker(), Handled())
    with pytest.raises(ValueError, match="not an RMS app name"):
        _consumer(RecordingAcker(), Handled(), app="Points")
    signing = TopicAcker("127.0.0.1:1", "points", signing_secret=SECRET)
    assert _consumer(signing, Handled()).app == "points"
    assert _consumer(signing, Handled(), app="points").app == "points"
    with pytest.raises(ValueError, match="differs from 'points'"):
        _consumer(signing, Handled(), app="billing")
