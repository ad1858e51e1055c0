"""A malformed record never stops the Python consumer: reading a record is total (any header
names and values, repeated or without values; a value that is no JSON, holds huge numbers or
is missing); a record that cannot be RMS's is set aside (logged, counted in ``skipped``), its
offset committed with the batch, and the next record is handled. Property-based on the
record reader; real Kafka, PostgreSQL and RMS for the loop."""

from __future__ import annotations

from aiokafka import ConsumerRecord
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.ext.asyncio import AsyncEngine

from rms_client.consumer import AckResult, BatchReport, HttpAcker, Outcome, RmsConsumer, RmsRecord
from rms_client.ids import is_valid_message_id
from tests.integration.sdk_consumer.helpers import CountingAcker, consume_until, copy_record, record_effect
from tests.support import Api, read_topic, write_records

_names = st.one_of(st.sampled_from(["rms-message-id", "rms-delivery", "rms-app",
                                    "rms-created-at", "traceparent", "tracestate"]),
                   st.text(max_size=30))
_values = st.one_of(st.none(), st.binary(max_size=200),
                    st.sampled_from([b"9" * 5000, "²".encode(), "١٢".encode(), b"-1", b"m-1",
                                     b"a/b\n", b"\xff\xfe", b"00-" + b"f" * 300]))
_bodies = st.one_of(st.none(), st.binary(max_size=300),
                    st.sampled_from([b"1" * 5000, b'{"n": 1' + b"0" * 400 + b"}", b"[" * 3000]))


@settings(max_examples=500, deadline=None)
@given(headers=st.lists(st.tuples(_names, _values), max_size=10), value=_bodies)
def test_reading_any_record_never_raises(headers: list[tuple[str, bytes | None]],
                                         value: bytes | None) -> None:
    record = ConsumerRecord("orders", 0, 1, 0, 0, b"k", value, None, 1, 1, headers)
    parsed = RmsRecord.parse(record)
    assert parsed is None or (is_valid_message_id(parsed.message_id) and parsed.delivery >= 0)


HOSTILE: list[tuple[bytes | None, list[tuple[str, bytes | None]]]] = [
    (b"{}", [("rms-message-id", b"m-hostile"), ("rms-delivery", "²".encode())]),
    (b"{}", [("rms-message-id", b"a/b\n"), ("rms-delivery", b"1")]),
    (b"{}", [("rms-message-id", b"m" * 5000)]),
    (b"{}", [("rms-message-id", None), ("rms-message-id", b"\xff\xfe")]),
    (b"\x00not json", [("rms-message-id", b"../..")]),
    (None, [("rms-delivery", b"9" * 5000)]),
]


async def test_hostile_records_are_set_aside_and_the_next_is_handled(
        api: Api, consumer_db: AsyncEngine, topic: str, unique: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=["orders.*"])
    message_id = await api.prepared_id(producer, topic)
    assert (await api.post(producer, f"/v1/messages/{message_id}/confirm")).status_code == 200
    servers = api.settings.kafka_bootstrap_servers
    (published,) = await read_topic(servers, topic, expect=1)
    await write_records(servers, topic, [(value if value is not None else b"", headers)
                                         for value, headers in HOSTILE])
    await copy_record(servers, published, 2)  # the valid record after them
    acker = CountingAcker(HttpAcker(client=api.client, api_key=points.api_key))
    consumer = RmsConsumer(app="points", engine=consumer_db, handler=record_effect, acker=acker,
                           bootstrap_servers=servers, group_id=f"points-{unique}",
                           topics=[topic])

    async def all_seen(reports: list[BatchReport]) -> bool:
        return sum(len(r.outcomes) + r.skipped for r in reports) >= len(HOSTILE) + 2

    async with consumer:
        reports = await consume_until(consumer, all_seen)
    outcomes = [found for report in reports for handled, found in report.outcomes
                if handled == message_id]
    assert outcomes == [Outcome.PROCESSED, Outcome.DUPLICATE]
    assert sum(report.skipped for report in reports) == len(HOSTILE) - 1
    assert {a.message_id for a in acker.acks if a.result is AckResult.ACKED} == {message_id}
