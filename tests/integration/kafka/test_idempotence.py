"""The idempotent producer (on by default, with acks=all): a publish whose answer is lost and
that the producer therefore sends again is written once. A proxy between RMS and the broker
that understands Kafka's framing swallows the broker's answer to the first produce request and
drops the connection, exactly what a network failure after the write looks like."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import OutOfOrderSequenceNumber

from rms.config import Settings
from rms.devstack.embedded import free_port
from rms.devstack.kafka_broker import EmbeddedKafka
from rms.kafka.publisher import KafkaPublisher, PublishError
from rms.kafka.records import OutgoingRecord
from tests.support import read_topic

PRODUCE = 0  # Kafka API key


@dataclass
class LostAnswerProxy:
    """Forwards ``listen_port`` to ``target_port``; loses the first ``lose`` produce answers."""

    listen_port: int
    target_port: int
    lose: int = 1
    lost: int = 0
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.listen_port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in self._tasks:
            task.cancel()

    async def _accept(self, client_in: asyncio.StreamReader,
                      client_out: asyncio.StreamWriter) -> None:
        broker_in, broker_out = await asyncio.open_connection("127.0.0.1", self.target_port)
        produce_ids: set[int] = set()
        writers = (client_out, broker_out)
        for pump in (self._requests(client_in, broker_out, produce_ids, writers),
                     self._answers(broker_in, client_out, produce_ids, writers)):
            task = asyncio.create_task(pump)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _requests(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter,
                        produce_ids: set[int], writers: tuple[asyncio.StreamWriter, ...]) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                frame = await _frame(source)
                api_key, _version, correlation = struct.unpack(">hhi", frame[4:12])
                if api_key == PRODUCE:
                    produce_ids.add(correlation)
                sink.write(frame)
                await sink.drain()
        _close(writers)

    async def _answers(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter,
                       produce_ids: set[int], writers: tuple[asyncio.StreamWriter, ...]) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                frame = await _frame(source)
                (correlation,) = struct.unpack(">i", frame[4:8])
                if correlation in produce_ids and self.lost < self.lose:
                    self.lost += 1  # the broker wrote the batch; its answer never arrives
                    break
                sink.write(frame)
                await sink.drain()
        _close(writers)


async def _frame(source: asyncio.StreamReader) -> bytes:
    head = await source.readexactly(4)
    return head + await source.readexactly(struct.unpack(">i", head)[0])


def _close(writers: tuple[asyncio.StreamWriter, ...]) -> None:
    for writer in writers:
        writer.close()


@pytest.fixture(scope="module")
def proxied_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedKafka]:
    broker = EmbeddedKafka(tmp_path_factory.mktemp("proxied-kafka"))
    broker.nodes[0].advertised_port = free_port()  # every client connection passes the proxy
    yield broker
    broker.stop()


@pytest.fixture
async def proxy(proxied_broker: EmbeddedKafka) -> AsyncIterator[LostAnswerProxy]:
    node = proxied_broker.nodes[0]
    assert node.advertised_port is not None
    lossy = LostAnswerProxy(node.advertised_port, node.port)
    await lossy.start()
    if not node.running():
        await asyncio.to_thread(proxied_broker.start)
    yield lossy
    await lossy.stop()


async def _publish_once(settings: Settings, bootstrap: str, topic: str, value: bytes) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic(topic, 1, 1)])
    await admin.close()
    publisher = KafkaPublisher(settings.model_copy(update={"kafka_bootstrap_servers": bootstrap}))
    await publisher.start(wait_seconds=10)
    try:
        await publisher.publish(OutgoingRecord(topic, b"k", value, []))
    finally:
        await publisher.stop()


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("idempotent", "copies"), [(True, 1), (False, 2)])
async def test_a_resent_publish_is_written_once_only_with_idempotence(
        settings: Settings, proxied_broker: EmbeddedKafka, proxy: LostAnswerProxy,
        unique: str, idempotent: bool, copies: int) -> None:
    """Without idempotence the same loss writes the record twice: the test can tell."""
    topic = f"idempotence.{unique}"
    local = settings.model_copy(update={"kafka_enable_idempotence": idempotent,
                                        "kafka_publish_timeout_seconds": 20.0})

    await _publish_once(local, proxied_broker.bootstrap_servers, topic, b"once")

    assert proxy.lost == 1
    records = await read_topic(proxied_broker.bootstrap_servers, topic, expect=copies + 1,
                               timeout=5, settle=0.5)
    assert [r.value for r in records] == [b"once"] * copies


@pytest.mark.timeout(60)
async def test_a_producer_with_a_fatal_error_is_replaced_and_publishes_again(
        settings: Settings, kafka: EmbeddedKafka, unique: str) -> None:
    """An idempotent producer whose sequence the broker refused (OutOfOrderSequenceNumber, as
    after a leader change lost its last batches) can never publish again: its sender has
    stopped. The publisher notices, reports the failure as ``producer-reset``, and replaces the
    producer; the retry is published."""
    from prometheus_client import REGISTRY

    topic = f"reset.{unique}"
    publisher = KafkaPublisher(settings)
    await publisher.start(wait_seconds=10)
    try:
        await publisher.publish(OutgoingRecord(topic, b"k", b"before", []))
        first = publisher._producer
        assert first is not None
        resets = REGISTRY.get_sample_value("rms_kafka_producer_resets_total") or 0.0
        sender = first._sender.sender_task
        assert sender is not None
        sender.cancel()  # the sender routine ends, as an OutOfOrderSequenceNumber ends it
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await sender

        with pytest.raises(PublishError) as failed:
            await publisher.publish(OutgoingRecord(topic, b"k", b"lost", []))
        failure = await publisher._failure(topic, OutOfOrderSequenceNumber())

        assert failed.value.failure.reason == "broker-unavailable"  # reconnecting
        assert failure.reason == "producer-reset"
        assert (REGISTRY.get_sample_value("rms_kafka_producer_resets_total") or 0.0) == resets + 1
        await asyncio.wait_for(publisher._connected.wait(), 10)
        await publisher.publish(OutgoingRecord(topic, b"k", b"after", []))
        assert publisher._producer is not first
    finally:
        await publisher.stop()
    records = await read_topic(kafka.bootstrap_servers, topic, expect=2, settle=0.3)
    assert [r.value for r in records] == [b"before", b"after"]
