"""The consumer side, its own process (``python -m bench.consumer ...``): reads the bench
topics with aiokafka and acknowledges every record by writing ``{"message_id", "consumer"}``
to the ack topic (design section 6), in batches.

For each record it appends ``message_id <TAB> delivery <TAB> receive time`` to ``--out``
(``time.time()`` when the fetch returned it), flushed after every batch, so the bench reads
what arrived while the consumer keeps running. Records without ``rms-message-id`` are ignored.

``--consumer-app`` may be given several times (the fan-out path's consumer apps, each signing
with its own secret: ``BENCH_SIGNING_SECRET`` holds them comma-separated, in the same order):
each app acks a record only when its ``rms-awaiting`` header names it (design section 6; a
record without the header is acked by every app given).

``--skip-first`` topics are the redelivery path: delivery 1 is received but not acknowledged.
``--route TOPIC=ACK_TOPIC`` sends the acks of one topic elsewhere (the bare baseline's).
``--ready FILE`` is created once the consumer has its partitions and positions.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from pathlib import Path
from typing import IO, Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from bench.kafka_options import kafka_options
from rms.kafka.records import (
    HEADER_AWAITING,
    HEADER_CREATED_AT,
    HEADER_DELIVERY,
    HEADER_MESSAGE_ID,
    header,
)
from rms_client.ack_records import ack_value, signed_ack_headers


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topics", required=True, help="comma-separated")
    parser.add_argument("--ack-topic", required=True)
    parser.add_argument("--consumer-app", action="append", required=True)
    parser.add_argument("--skip-first", default="", help="comma-separated topics")
    parser.add_argument("--route", action="append", default=[], help="TOPIC=ACK_TOPIC")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--ready", type=Path, required=True)
    return parser.parse_args(argv)


class Acker:
    def __init__(self, args: argparse.Namespace, producer: AIOKafkaProducer, log: IO[str]) -> None:
        self.skip_first = set(filter(None, args.skip_first.split(",")))
        self.routes = dict(route.split("=", 1) for route in args.route)
        self.ack_topic = args.ack_topic
        secrets = os.environ["BENCH_SIGNING_SECRET"].split(",")  # not on the command line
        self.apps = list(zip(args.consumer_app, secrets, strict=True))
        self.producer = producer
        self.log = log

    async def handle(self, records: list[Any]) -> None:
        received = time.time()
        lines, sends = [], []
        for record in records:
            message_id = header(list(record.headers), HEADER_MESSAGE_ID)
            if message_id is None:
                continue
            delivery = int(header(list(record.headers), HEADER_DELIVERY) or "0")
            lines.append(f"{message_id}\t{delivery}\t{received:.6f}\n")
            if delivery <= 1 and record.topic in self.skip_first:
                continue
            sends += [await self._ack(record, message_id, app, secret)
                      for app, secret in self._named(record)]
        self.log.write("".join(lines))
        self.log.flush()
        if sends:
            await asyncio.gather(*sends)

    def _named(self, record: Any) -> list[tuple[str, str]]:
        """The apps this record is for: those its ``rms-awaiting`` names, else every one."""
        awaiting = header(list(record.headers), HEADER_AWAITING)
        if awaiting is None:
            return self.apps
        named = set(awaiting.split(","))
        return [(app, secret) for app, secret in self.apps if app in named]

    async def _ack(self, record: Any, message_id: str, app: str, secret: str
                   ) -> asyncio.Future[Any]:
        value = ack_value(message_id, app, header(list(record.headers), HEADER_CREATED_AT) or "")
        topic = self.routes.get(record.topic, self.ack_topic)
        sent: asyncio.Future[Any] = await self.producer.send(
            topic, value, key=message_id.encode(), headers=signed_ack_headers([secret], value))
        return sent


async def consume(args: argparse.Namespace) -> None:
    topics = [t for t in args.topics.split(",") if t]
    options = kafka_options(args.bootstrap)
    consumer = AIOKafkaConsumer(*topics, **options, group_id=None,
                                auto_offset_reset="latest", fetch_max_wait_ms=5,
                                max_partition_fetch_bytes=8 << 20)
    producer = AIOKafkaProducer(**options, linger_ms=2,
                                enable_idempotence=False)
    await consumer.start()
    await producer.start()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    try:
        with args.out.open("a") as log:
            acker = Acker(args, producer, log)
            first = await consumer.getmany(timeout_ms=100)
            await acker.handle([r for batch in first.values() for r in batch])
            for partition in consumer.assignment():
                await consumer.position(partition)
            args.ready.touch()
            while not stop.is_set():
                batches = await consumer.getmany(timeout_ms=100, max_records=5000)
                records = [r for batch in batches.values() for r in batch]
                if records:
                    await acker.handle(records)
    finally:
        await producer.stop()
        await consumer.stop()


def main(argv: list[str]) -> int:
    import uvloop

    uvloop.run(consume(parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
