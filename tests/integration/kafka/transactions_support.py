"""What the Kafka transaction tests read: the broker's own log segments (Kafka's
``DumpLogSegments``) and a ``read_committed`` observer of a transaction's topics."""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, ConsumerRecord

from rms.devstack.kafka_broker import EmbeddedKafka, kafka_classpath
from rms.devstack.kafka_broker.install import java_binary
from rms.kafka.records import header


@dataclass(frozen=True)
class Batch:
    transactional: bool
    control: bool
    marker: str | None  # COMMIT or ABORT for a control batch


def broker_batches(kafka: EmbeddedKafka, topic: str) -> list[Batch]:
    """Every batch of every partition of ``topic`` as the broker's log holds it, in log order
    per partition (partitions one after another)."""
    logs = sorted(str(p) for p in kafka.nodes[0].log_dir.glob(f"{topic}-*/*.log"))
    assert logs, f"no log segment of {topic} under {kafka.nodes[0].log_dir}"
    dumped = subprocess.run(
        [java_binary(), "-Xmx128m", "-cp", kafka_classpath(), "org.apache.kafka.tools.DumpLogSegments",
         "--print-data-log", "--files", ",".join(logs)],
        capture_output=True, text=True, timeout=120, check=False)
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    batches: list[Batch] = []
    for line in dumped.stdout.splitlines():
        if line.startswith("baseOffset:"):
            batches.append(Batch(transactional="isTransactional: true" in line,
                                 control="isControl: true" in line, marker=None))
        elif (found := re.search(r"endTxnMarker: (\w+)", line)) and batches:
            last = batches[-1]
            batches[-1] = Batch(last.transactional, last.control, found.group(1))
    return batches


@dataclass
class Observer:
    """A ``read_committed`` consumer of ``topics`` from their start, collecting every record."""

    bootstrap: str
    topics: Sequence[str]
    isolation: str = "read_committed"
    records: list[ConsumerRecord[bytes, bytes]] = field(default_factory=list)

    def seen(self, delivery: str | None = None) -> list[str]:
        """The message ids seen (of delivery ``delivery`` only, when given), in arrival order."""
        return [header(list(r.headers), "rms-message-id") or "" for r in self.records
                if delivery is None or header(list(r.headers), "rms-delivery") == delivery]

    async def until(self, condition: str, predicate: Callable[[], bool], timeout: float) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while not predicate():
            assert asyncio.get_running_loop().time() < deadline, (
                f"{condition} never happened; seen {self.seen()}")
            await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def observing(bootstrap: str, topics: Sequence[str],
                    isolation: str = "read_committed") -> AsyncIterator[Observer]:
    observer = Observer(bootstrap, topics, isolation)
    consumer = AIOKafkaConsumer(*topics, bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                isolation_level=isolation, metadata_max_age_ms=500)
    await consumer.start()

    async def poll() -> None:
        while True:
            batch = await consumer.getmany(timeout_ms=100)
            observer.records += [r for part in batch.values() for r in part]

    task = asyncio.create_task(poll())
    try:
        yield observer
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await consumer.stop()
