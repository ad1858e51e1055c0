"""The consumer side of the RMS Python SDK: at-least-once delivery with exactly-once effect.

RMS delivers every message at least once: a record can arrive twice because the recovery
service re-published it (no ack in time), because the broker or this consumer restarted before
the Kafka offset was committed, or because an operator resent it. :class:`RmsConsumer` turns
that into exactly-once *effect* on the consumer's own database:

1. it reads the ``rms-message-id`` header of each record (design section 6);
2. in **one transaction** of the consumer's database it inserts the id into an inbox table
   (``INSERT ... ON CONFLICT DO NOTHING RETURNING``) and runs the caller's handler with the same
   connection. If the id was there already, the record is a redelivery: the handler is skipped.
   If the handler raises, the transaction rolls back, inbox row included, so the message is
   processed again when it comes again;
3. only after that commit it acknowledges the message to RMS as its own app (HTTP or the ack
   topic), also for a skipped duplicate (the first ack may have been lost);
4. only after the acks it commits the Kafka offsets. A crash anywhere before that makes Kafka
   deliver the records again, and the inbox makes that harmless.

A handler that raises is neither acked nor retried in place: RMS re-publishes the message when
its ack deadline passes (with backoff, up to ``max_deliveries``, then it is a dead letter an
operator can inspect and resend), so one bad message never blocks its partition.
A record that cannot be RMS's (no valid ``rms-message-id``, or unreadable) is set aside:
logged, counted in :attr:`BatchReport.skipped`, and committed with its batch; an acker that
raises fails that ack alone. No record stops the consumer.

Several apps may consume one topic, and a message is done when each of them acked. A record
whose ``rms-awaiting`` header does not name this consumer's ``app`` is a redelivery meant for
the others: this app acked the message already, so the record is skipped (no handler, no
database, no ack), logged and reported as :attr:`Outcome.NOT_AWAITED`, and committed past with
its batch. A record without the header, or with one that cannot be read, is handled.

At start the consumer checks ``app`` against the app of the acker's API key
(:meth:`RmsConsumer.check_app`) and refuses to run under another name. Its Kafka consumer group
is the app's name unless ``group_id`` names another (a warning: each consumer app needs a group
of its own), and ``instance_id`` makes the process a static member of it.

Usage::

    engine = create_async_engine("postgresql+asyncpg://.../points")
    await ensure_inbox(engine)

    async def add_points(conn: AsyncConnection, message: RmsRecord) -> None:
        await conn.execute(...)  # your changes, in the inbox's transaction

    acker = HttpAcker("http://rms:8000", api_key="...")   # or TopicAcker(...)
    async with RmsConsumer(app="points", engine=engine, handler=add_points, acker=acker,
                           bootstrap_servers="kafka:9092", topics=["orders.paid"],
                           instance_id=os.environ["HOSTNAME"]) as consumer:
        await consumer.run()

One inbox table serves one handler: two consumers of the same message with different effects
need two tables (``inbox_table=``) or two databases.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import TracebackType
from typing import Any

import orjson
import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRecord
from aiokafka.errors import KafkaError
from sqlalchemy import Column, DateTime, MetaData, Table, Text, func
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from rms_client import tracing
from rms_client.ackers import (
    Ack,
    Acker,
    AckResult,
    HttpAcker,
    TopicAcker,
    WrongApp,
    make_acker,
)
from rms_client.awaiting import awaiting_of, awaits
from rms_client.ids import is_valid_app_name, is_valid_message_id
from rms_client.trace import TraceContext

__all__ = ["Ack", "AckResult", "Acker", "BatchReport", "HttpAcker", "InboxProcessor", "Outcome",
           "RmsConsumer", "RmsRecord", "TopicAcker", "WrongApp", "consumer_app", "ensure_inbox",
           "inbox_table", "make_acker"]

log = structlog.get_logger(__name__)

HEADER_MESSAGE_ID = "rms-message-id"
HEADER_APP = "rms-app"
HEADER_DELIVERY = "rms-delivery"
HEADER_CREATED_AT = "rms-created-at"
_DELIVERY_DIGITS = 9  # more deliveries than any max_deliveries allows
DEFAULT_INBOX = "rms_inbox"
_TABLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


# ---- the inbox ---------------------------------------------------------------------------------

def inbox_table(name: str = DEFAULT_INBOX) -> Table:
    """The inbox: one row per message id whose handler committed."""
    if not _TABLE_NAME.fullmatch(name):
        raise ValueError(f"inbox table name {name!r} must match {_TABLE_NAME.pattern}")
    return Table(
        name, MetaData(),
        Column("message_id", Text, primary_key=True),
        Column("topic", Text, nullable=False),
        Column("processed_at", DateTime(timezone=True), nullable=False,
               server_default=func.now()),
    )


async def ensure_inbox(engine: AsyncEngine, name: str = DEFAULT_INBOX) -> None:
    """Create the inbox table in the consumer's database if it is missing (idempotent).
    Projects with their own migrations can create the same table there instead."""
    table = inbox_table(name)
    async with engine.begin() as conn:
        await conn.run_sync(table.metadata.create_all, checkfirst=True)


# ---- records -----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RmsRecord:
    """A consumed RMS record with its headers decoded (design section 6)."""

    message_id: str
    delivery: int
    app: str | None
    topic: str
    key: bytes | None
    payload: Any
    headers: dict[str, str]
    record: ConsumerRecord[bytes, bytes] = field(repr=False)
    created_at: str | None = None  # the rms-created-at header as it came: which instance
    # the rms-awaiting header's app names: None without one, or when it cannot be read
    awaiting: frozenset[str] | None = None

    def awaits(self, app: str) -> bool:
        """Whether the record is for ``app``: false only when its ``rms-awaiting`` header was
        read and does not name it (``app`` acked the message already)."""
        return awaits(self.awaiting, app)

    @property
    def trace(self) -> TraceContext | None:
        """The record's W3C trace context (``traceparent`` / ``tracestate``), if valid."""
        return tracing.from_headers(self.headers)

    @classmethod
    def parse(cls, record: ConsumerRecord[bytes, bytes]) -> RmsRecord | None:
        """None for a record RMS did not publish or cannot have published (no valid
        ``rms-message-id``) and for one this function cannot read: it never raises, so one
        record cannot stop the consumer (the caller sets it aside and goes on)."""
        try:
            return cls._parse(record)
        except Exception:  # whatever the record holds: set aside, never raised
            return None

    @classmethod
    def _parse(cls, record: ConsumerRecord[bytes, bytes]) -> RmsRecord | None:
        headers = {str(name): (value or b"").decode(errors="replace")
                   for name, value in record.headers or ()}
        message_id = headers.get(HEADER_MESSAGE_ID)
        if not message_id or not is_valid_message_id(message_id):
            return None
        try:
            payload = orjson.loads(record.value) if record.value is not None else None
        except orjson.JSONDecodeError:
            payload = record.value
        delivery = headers.get(HEADER_DELIVERY, "")
        counted = delivery.isascii() and delivery.isdigit() and len(delivery) <= _DELIVERY_DIGITS
        return cls(message_id=message_id, delivery=int(delivery) if counted else 0,
                   app=headers.get(HEADER_APP), topic=record.topic, key=record.key,
                   payload=payload, headers=headers, record=record,
                   created_at=headers.get(HEADER_CREATED_AT),
                   awaiting=awaiting_of(record.headers))


Handler = Callable[[AsyncConnection, RmsRecord], Awaitable[None]]


class Outcome(StrEnum):
    PROCESSED = "processed"  # the handler ran and committed with the inbox row
    DUPLICATE = "duplicate"  # the inbox had the id: handler skipped
    FAILED = "failed"  # the handler (or the database) raised: rolled back, not acked
    NOT_AWAITED = "not-awaited"  # rms-awaiting does not name this app: not handled, not acked

    @property
    def acks(self) -> bool:
        return self in (Outcome.PROCESSED, Outcome.DUPLICATE)


class InboxProcessor:
    """Runs a handler at most once per message id (the database half of the consumer)."""

    def __init__(self, engine: AsyncEngine, handler: Handler, inbox: str = DEFAULT_INBOX) -> None:
        self._engine = engine
        self._handler = handler
        self._inbox = inbox_table(inbox)

    async def process(self, message: RmsRecord) -> Outcome:
        claim = (
            pg_insert(self._inbox)
            .values(message_id=message.message_id, topic=message.topic)
            .on_conflict_do_nothing(index_elements=["message_id"])
            .returning(self._inbox.c.message_id)
        )
        try:
            async with self._engine.begin() as conn:
                if (await conn.execute(claim)).first() is None:
                    return Outcome.DUPLICATE
                await self._handler(conn, message)
        except Exception:  # the caller's code: any failure means "not processed"
            log.exception("consumer.handler_failed", message_id=message.message_id,
                          topic=message.topic, attempt=message.delivery)
            return Outcome.FAILED
        return Outcome.PROCESSED


# ---- the consumer ------------------------------------------------------------------------------

@dataclass
class BatchReport:
    outcomes: list[tuple[str, Outcome]] = field(default_factory=list)
    acks: list[Ack] = field(default_factory=list)
    skipped: int = 0  # records that cannot be RMS's (no valid rms-message-id): logged, set aside

    def count(self, outcome: Outcome) -> int:
        return sum(1 for _, found in self.outcomes if found is outcome)


def consumer_app(app: str | None, acker: Acker) -> str:
    """The app a consumer acks as: ``app``, or the one a :class:`TopicAcker` signs for. A
    :class:`ValueError` when it is unknown, malformed, or not the acker's."""
    signs_for = acker.consumer_app if isinstance(acker, TopicAcker) else None
    name = app or signs_for
    if name is None:
        raise ValueError("RmsConsumer needs app=, the name RMS knows this consumer app by: "
                         "it skips the records whose rms-awaiting header does not name it")
    if not is_valid_app_name(name):
        raise ValueError(f"app {name!r} is not an RMS app name (a lowercase letter or digit, "
                         "then up to 62 of a-z, 0-9, '_' and '-')")
    if signs_for is not None and signs_for != name:
        raise ValueError(f"app {name!r} differs from {signs_for!r}, the app the TopicAcker "
                         "signs ack records for")
    return name


class RmsConsumer:
    """Kafka records -> inbox + handler (one transaction) -> ack -> offset commit."""

    def __init__(self, *, engine: AsyncEngine, handler: Handler, acker: Acker,
                 bootstrap_servers: str, group_id: str | None = None,
                 topics: Sequence[str] = (), pattern: str | None = None,
                 app: str | None = None, inbox_table: str = DEFAULT_INBOX,
                 max_records: int = 200, ack_concurrency: int = 32,
                 client_id: str = "rms-consumer", instance_id: str | None = None,
                 kafka_options: Mapping[str, Any] | None = None) -> None:
        """``app`` is the name RMS knows this consumer app by (it may be left out with a
        :class:`TopicAcker`, which names it). ``group_id`` is the Kafka consumer group, the
        app's name unless given: each consumer app needs a group of its own, since Kafka gives
        each partition to one member of a group and an app sharing a group with another would
        not read the records the other's members get (a warning says so when the two differ).
        ``instance_id`` makes this process a static member of its group
        (``group.instance.id``, one stable id per process of the app): restarted with the same
        id it gets its partitions back at once instead of after the session timeout.
        ``kafka_options`` go to :class:`aiokafka.AIOKafkaConsumer` as they are (security,
        ``metadata_max_age_ms``, ...; ``isolation_level`` is ``read_committed`` unless they
        say otherwise); offsets are always committed by this class."""
        if bool(topics) == bool(pattern):
            raise ValueError("give either topics or pattern")
        self.app = consumer_app(app, acker)
        self.group_id = group_id or self.app
        if self.group_id != self.app:
            log.warning("consumer.group_not_app", app=self.app, group_id=self.group_id,
                        hint="each consumer app needs a Kafka consumer group of its own: an "
                             "app sharing a group with another misses the records Kafka gives "
                             "the other's members")
        self._processor = InboxProcessor(engine, handler, inbox_table)
        self._acker = acker
        self._topics = list(topics)
        self._pattern = pattern
        self._max_records = max_records
        self._ack_gate = asyncio.Semaphore(ack_concurrency)
        # read_committed: a transaction's records (one Kafka transaction) arrive all or none,
        # and a publish its process never committed is never read
        options: dict[str, Any] = {"auto_offset_reset": "earliest", "client_id": client_id,
                                   "isolation_level": "read_committed"}
        if instance_id is not None:
            options["group_instance_id"] = instance_id
        options |= dict(kafka_options or {})
        options |= {"enable_auto_commit": False}
        self._consumer = AIOKafkaConsumer(
            *self._topics, bootstrap_servers=bootstrap_servers, group_id=self.group_id,
            **options)
        self._stopping = asyncio.Event()

    async def __aenter__(self) -> RmsConsumer:
        await self.start()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.stop()

    async def start(self) -> None:
        """Check the app name against the app of the acker's API key (:class:`WrongApp`, and
        nothing consumed, when they differ), then join the group."""
        await self.check_app()
        if self._pattern is not None:
            self._consumer.subscribe(pattern=self._pattern)
        await self._consumer.start()

    async def check_app(self) -> None:
        """:class:`WrongApp` when the acker's API key acts as another app than :attr:`app`
        (or RMS knows no such key). Skipped for an acker without a key and when RMS cannot
        tell (unreachable, or a release without ``GET /v1/apps/me``): logged, then consumed."""
        whoami = getattr(self._acker, "app_of_key", None)
        if whoami is None:
            return
        try:
            actual = await whoami()
        except WrongApp as exc:
            log.error("consumer.wrong_app", app=self.app, error=str(exc))
            await self._acker.close()
            raise
        if actual is None:
            log.warning("consumer.app_unchecked", app=self.app,
                        hint="RMS could not tell the app of this consumer's API key")
        elif actual != self.app:
            line = (f"this consumer is configured as app {self.app!r}, but its API key is app "
                    f"{actual!r}'s: it would skip every record RMS awaits from {actual!r}; "
                    f"refusing to run (give app={actual!r}, or that app's key)")
            log.error("consumer.wrong_app", app=self.app, key_app=actual, error=line)
            await self._acker.close()
            raise WrongApp(line)

    async def stop(self) -> None:
        """Stop consuming; offsets of records not fully handled stay uncommitted."""
        self._stopping.set()
        with contextlib.suppress(KafkaError, OSError):
            await self._consumer.stop()
        await self._acker.close()

    async def run(self) -> None:
        """Consume until :meth:`stop` (or cancellation)."""
        while not self._stopping.is_set():
            await self.run_once()

    async def run_once(self, timeout_ms: int = 500) -> BatchReport:
        """Fetch one batch, handle it, ack it, then commit its offsets."""
        batches = await self._consumer.getmany(timeout_ms=timeout_ms,
                                               max_records=self._max_records)
        records = [record for batch in batches.values() for record in batch]
        if not records:
            return BatchReport()
        report = await self.handle(records)
        await self._commit()
        return report

    async def handle(self, records: Sequence[ConsumerRecord[bytes, bytes]]) -> BatchReport:
        """Handle records in order (one transaction each), then ack the handled ones."""
        report = BatchReport()
        traces: dict[str, TraceContext | None] = {}
        instances: dict[str, str | None] = {}
        for record in records:
            message = self._to_handle(record, report)
            if message is None:
                continue
            outcome, traces[message.message_id] = await self._process(message)
            instances[message.message_id] = message.created_at
            report.outcomes.append((message.message_id, outcome))
        to_ack = list(dict.fromkeys(i for i, outcome in report.outcomes if outcome.acks))
        report.acks = list(await asyncio.gather(*(self._ack(i, instances[i], traces[i])
                                                  for i in to_ack)))
        return report

    def _to_handle(self, record: ConsumerRecord[bytes, bytes],
                   report: BatchReport) -> RmsRecord | None:
        """The record as an RMS record to handle, or None when it is set aside (not RMS's) or
        skipped (not awaited from this app); either is logged and reported."""
        message = RmsRecord.parse(record)
        if message is None:
            log.warning("consumer.not_an_rms_record", topic=record.topic,
                        hint="no valid rms-message-id, or unreadable: set aside",
                        partition=record.partition, offset=record.offset)
            report.skipped += 1
        elif not message.awaits(self.app):
            log.info("consumer.not_awaited", message_id=message.message_id,
                     topic=message.topic, app=self.app, attempt=message.delivery,
                     hint="rms-awaiting does not name this app: acked already, skipped")
            report.outcomes.append((message.message_id, Outcome.NOT_AWAITED))
            return None
        return message

    async def _process(self, message: RmsRecord) -> tuple[Outcome, TraceContext | None]:
        """The handler runs in a span whose parent is the record's trace context (current
        while it runs, so the handler's own spans are its children); returns that span's
        context, which the ack carries."""
        with tracing.start("rms.process", message.trace, kind="consumer", attributes={
                "messaging.system": "kafka", "messaging.destination.name": message.topic,
                "rms.message_id": message.message_id, "rms.delivery": message.delivery}
                ) as span, tracing.current(span):
            outcome = await self._processor.process(message)
            span.set("rms.outcome", outcome.value)
            if outcome is Outcome.FAILED:
                span.fail("handler failed")
        return outcome, span.context

    async def _ack(self, message_id: str, created_at: str | None = None,
                   trace: TraceContext | None = None) -> Ack:
        async with self._ack_gate:
            with tracing.start("rms.ack", trace, kind="client",
                               attributes={"rms.message_id": message_id}) as span, \
                    tracing.current(span):
                ack = await self._acked(message_id, created_at)
                if ack.result is not AckResult.ACKED:
                    span.fail(f"{ack.result.value}: {ack.detail}")
        if ack.result is AckResult.REFUSED:
            log.warning("consumer.ack_refused", message_id=message_id, status=ack.status,
                        detail=ack.detail)
        elif ack.result is AckResult.FAILED:
            log.warning("consumer.ack_failed", message_id=message_id, detail=ack.detail)
        return ack

    async def _acked(self, message_id: str, created_at: str | None) -> Ack:
        """The acker's answer; an acker that raises fails this ack alone (the message comes
        again), never the batch."""
        try:
            return await self._acker.ack(message_id, created_at)
        except Exception as exc:  # an acker of the caller's: any failure means "not acked"
            return Ack(message_id, AckResult.FAILED, None, f"{type(exc).__name__}: {exc}")

    async def _commit(self) -> None:
        """A failed commit (e.g. a rebalance) only means the records may come again."""
        try:
            await self._consumer.commit()
        except KafkaError as exc:
            log.warning("consumer.commit_failed", error=str(exc))
