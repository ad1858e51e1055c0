"""A small message history written by hand, and helpers that store a history in PostgreSQL
or write it as an ``rms export`` directory.

The expected report figures in ``test_hand_history.py`` are worked out by hand from the
comments below; nothing in this module computes a metric.

Window 2026-03-02T10:00Z .. 2026-03-03T01:00Z, "now" (as of) 2026-03-03T02:00Z, grace 60 s.
Targets: orders.paid 10 s, orders.* 30 s, default 60 s.
"""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from history.tables import EVENT_COLUMNS, MESSAGE_COLUMNS, arrow_schema

SINCE = "2026-03-02T10:00:00Z"
UNTIL = "2026-03-03T01:00:00Z"
AS_OF = "2026-03-03T02:00:00Z"
TARGETS_TOML = '''default_seconds = 60

[topics]
"orders.paid" = 10
"orders.*" = 30
'''


def ts(text: str) -> datetime:
    """``"2026-03-02T10:00:02.500"`` as a UTC instant."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@dataclass
class Msg:
    message_id: str
    app: str
    topic: str
    state: str
    created_at: datetime
    confirmed_at: datetime | None = None
    done_at: datetime | None = None
    deleted_at: datetime | None = None
    next_check_at: datetime | None = None
    next_delivery_at: datetime | None = None
    dead: bool = False
    dead_reason: str | None = None
    check_count: int = 0
    delivery_count: int = 0
    deliver_after: datetime | None = None
    subscribers: list[str] | None = None  # None: the single-ack rule
    acks: dict[str, datetime] | None = None  # consumer -> when its ack was recorded

    @property
    def acks_json(self) -> str | None:
        """``messages.acks`` as the store writes it: consumer -> {at, via}."""
        if self.acks is None:
            return None
        return json.dumps({c: {"at": at.isoformat(), "via": "http"}
                           for c, at in self.acks.items()})

    def row(self) -> dict[str, Any]:
        """Every exported column, with the policy fields at their defaults."""
        return {
            "message_id": self.message_id, "app": self.app, "topic": self.topic, "key": None,
            "payload": "{}", "headers": "{}", "check_url": "http://127.0.0.1/check",
            "state": self.state, "dead": self.dead, "dead_reason": self.dead_reason,
            "check_count": self.check_count, "delivery_count": self.delivery_count,
            "delivery_base": 0, "check_after_seconds": 10.0, "max_checks": 15,
            "ack_timeout_seconds": 60.0, "max_deliveries": 6, "created_at": self.created_at,
            "confirmed_at": self.confirmed_at, "done_at": self.done_at,
            "deleted_at": self.deleted_at, "next_check_at": self.next_check_at,
            "next_delivery_at": self.next_delivery_at, "deliver_after": self.deliver_after,
            "subscribers": None if self.subscribers is None else json.dumps(self.subscribers),
            "acks": self.acks_json,
        }


@dataclass
class Ev:
    message_id: str
    at: datetime
    event: str
    detail: dict[str, Any] | str = field(default_factory=dict)  # a str is stored verbatim
    actor: str = "rms"

    @property
    def detail_text(self) -> str:
        return self.detail if isinstance(self.detail, str) else json.dumps(self.detail)


def ev(message_id: str, at: str, event: str, **detail: Any) -> Ev:
    return Ev(message_id, ts(at), event, detail)


@dataclass(frozen=True)
class Report:
    """A report run: its summary and its output directory."""

    summary: dict[str, Any]
    out: Path


@dataclass
class History:
    messages: list[Msg]
    events: list[Ev]

    @property
    def apps(self) -> list[str]:
        return sorted({m.app for m in self.messages})


def _group_1() -> History:
    """shop / orders.paid, hour 10 (target 10 s)."""
    t = "2026-03-02T"
    return History(
        messages=[
            # m1 confirmed by producer after 2 s, published 1 s later, done 2 s after that;
            # acked by its two consumers: invoicing 1 s after the publish, points 2 s.
            Msg("m1", "shop", "orders.paid", "done", ts(t + "10:00:00"),
                confirmed_at=ts(t + "10:00:02"), done_at=ts(t + "10:00:05"), delivery_count=1),
            # m2 two check-backs (unknown, committed), redelivered once; confirm->done 70 s
            # (acked by points, 69 s after the first publish).
            Msg("m2", "shop", "orders.paid", "done", ts(t + "10:10:00"),
                confirmed_at=ts(t + "10:10:30"), done_at=ts(t + "10:11:40"), check_count=2,
                delivery_count=2),
            # m3 cancelled by the producer.
            Msg("m3", "shop", "orders.paid", "deleted", ts(t + "10:20:00"),
                deleted_at=ts(t + "10:20:04")),
            # m4 rolled back by check-back.
            Msg("m4", "shop", "orders.paid", "deleted", ts(t + "10:30:00"),
                deleted_at=ts(t + "10:30:10"), check_count=1),
            # m5 one-shot; the ack (by points, its actor a bare name) is stored 0.25 s before
            # the publisher's record (a race).
            Msg("m5", "shop", "orders.paid", "done", ts(t + "10:40:00"),
                confirmed_at=ts(t + "10:40:00"), done_at=ts(t + "10:40:00.250"),
                delivery_count=1),
            # m6 three unknown check-backs, then dead (check-exhausted).
            Msg("m6", "shop", "orders.paid", "pending-send", ts(t + "10:50:00"), dead=True,
                dead_reason="check-exhausted", check_count=3),
        ],
        events=[
            ev("m1", t + "10:00:00", "prepared"),
            ev("m1", t + "10:00:02", "confirmed", by="producer"),
            ev("m1", t + "10:00:03", "published", delivery=1),
            Ev("m1", ts(t + "10:00:05"), "acked", {"via": "http"}, actor="app:points"),
            Ev("m1", ts(t + "10:00:04"), "acked", {"via": "ack-topic"}, actor="app:invoicing"),
            ev("m2", t + "10:10:00", "prepared"),
            ev("m2", t + "10:10:10", "checked", attempt=1, outcome="unknown", error="timeout"),
            ev("m2", t + "10:10:30", "checked", attempt=2, outcome="committed"),
            ev("m2", t + "10:10:30", "confirmed", by="check-back"),
            ev("m2", t + "10:10:31", "published", delivery=1),
            ev("m2", t + "10:11:31", "published", delivery=2),
            Ev("m2", ts(t + "10:11:40"), "acked", {"via": "ack-topic"}, actor="app:points"),
            ev("m3", t + "10:20:00", "prepared"),
            ev("m3", t + "10:20:04", "cancelled", by="producer"),
            ev("m4", t + "10:30:00", "prepared"),
            ev("m4", t + "10:30:10", "checked", attempt=1, outcome="rolled_back"),
            ev("m4", t + "10:30:10", "cancelled", by="check-back"),
            ev("m5", t + "10:40:00", "sent"),
            Ev("m5", ts(t + "10:40:00.250"), "acked", {"via": "http"}, actor="points"),
            ev("m5", t + "10:40:00.500", "published", delivery=1),
            ev("m6", t + "10:50:00", "prepared"),
            ev("m6", t + "10:50:10", "checked", attempt=1, outcome="unknown"),
            ev("m6", t + "10:50:30", "checked", attempt=2, outcome="unknown"),
            ev("m6", t + "10:51:10", "checked", attempt=3, outcome="unknown"),
            ev("m6", t + "10:51:10", "dead", reason="check-exhausted"),
        ],
    )


def _group_2() -> History:
    """shop / orders.paid, hour 11 (target 10 s)."""
    t = "2026-03-02T"
    return History(
        messages=[
            # m7 delivered 3 times, never acked: dead (delivery-exhausted), state sent.
            Msg("m7", "shop", "orders.paid", "sent", ts(t + "11:00:00"),
                confirmed_at=ts(t + "11:00:01"), dead=True, dead_reason="delivery-exhausted",
                delivery_count=3),
            # m8 confirmed by an admin after 15 min; unacked, ack deadline 11:21:01.
            Msg("m8", "shop", "orders.paid", "sent", ts(t + "11:05:00"),
                confirmed_at=ts(t + "11:20:00"), next_delivery_at=ts(t + "11:21:01"),
                check_count=1, delivery_count=1),
            # m9 pending-send, check-back due 11:10:10 and never made.
            Msg("m9", "shop", "orders.paid", "pending-send", ts(t + "11:10:00"),
                next_check_at=ts(t + "11:10:10")),
        ],
        events=[
            ev("m7", t + "11:00:00", "prepared"),
            ev("m7", t + "11:00:01", "confirmed", by="producer"),
            ev("m7", t + "11:00:02", "published", delivery=1),
            ev("m7", t + "11:01:02", "published", delivery=2),
            ev("m7", t + "11:03:02", "published", delivery=3),
            ev("m7", t + "11:07:02", "dead", reason="delivery-exhausted"),
            ev("m8", t + "11:05:00", "prepared"),
            ev("m8", t + "11:05:10", "checked", attempt=1, outcome="unknown"),
            Ev("m8", ts(t + "11:20:00"), "confirmed", {"by": "admin"}, actor="admin"),
            ev("m8", t + "11:20:01", "published", delivery=1),
            ev("m9", t + "11:10:00", "prepared"),
        ],
    )


def _group_3() -> History:
    """shop / orders.shipped, hour 11 (target 30 s, from the orders.* pattern)."""
    t = "2026-03-02T"
    return History(
        messages=[
            # m10 done 19.5 s after confirmation; an event name the report does not know.
            Msg("m10", "shop", "orders.shipped", "done", ts(t + "11:30:00"),
                confirmed_at=ts(t + "11:30:00.500"), done_at=ts(t + "11:30:20"),
                delivery_count=1),
            # m11 done exactly 30 s after confirmation; its published event is missing.
            Msg("m11", "shop", "orders.shipped", "done", ts(t + "11:40:00"),
                confirmed_at=ts(t + "11:40:01"), done_at=ts(t + "11:40:31"), delivery_count=1),
            # m19 dead after 2 deliveries, resent by an admin 37 min later, then acked.
            Msg("m19", "shop", "orders.shipped", "done", ts(t + "11:50:00"),
                confirmed_at=ts(t + "11:50:01"), done_at=ts(t + "12:30:01"), delivery_count=3),
        ],
        events=[
            ev("m10", t + "11:30:00", "prepared"),
            ev("m10", t + "11:30:00.500", "confirmed", by="producer"),
            ev("m10", t + "11:30:01", "published", delivery=1),
            ev("m10", t + "11:30:05", "annotated", note="not an RMS event"),
            ev("m10", t + "11:30:20", "acked", via="http"),
            ev("m11", t + "11:40:00", "prepared"),
            ev("m11", t + "11:40:01", "confirmed", by="producer"),
            ev("m11", t + "11:40:31", "acked", via="http"),
            ev("m19", t + "11:50:00", "prepared"),
            ev("m19", t + "11:50:01", "confirmed", by="producer"),
            ev("m19", t + "11:50:02", "published", delivery=1),
            ev("m19", t + "11:51:02", "published", delivery=2),
            ev("m19", t + "11:53:02", "dead", reason="delivery-exhausted"),
            Ev("m19", ts(t + "12:30:00"), "resent", {"delivery": 3}, actor="admin"),
            ev("m19", t + "12:30:00.500", "published", delivery=3),
            ev("m19", t + "12:30:01", "acked", via="http"),
        ],
    )


def _group_5() -> History:
    """billing / refunds, hour 12 (default target 60 s): r01..r20 created a minute apart;
    r_i is confirmed i s after prepare, published 1 s later, done 3*i s after that."""
    messages, events = [], []
    for i in range(1, 21):
        mid = f"r{i:02d}"
        created = ts("2026-03-02T12:00:00") + timedelta(minutes=i - 1)
        confirmed = created + timedelta(seconds=i)
        published = confirmed + timedelta(seconds=1)
        done = published + timedelta(seconds=3 * i)
        messages.append(Msg(mid, "billing", "refunds", "done", created, confirmed_at=confirmed,
                            done_at=done, delivery_count=1))
        events += [Ev(mid, created, "prepared"), Ev(mid, confirmed, "confirmed", {"by": "producer"}),
                   Ev(mid, published, "published", {"delivery": 1}),
                   Ev(mid, done, "acked", {"via": "http"})]
    return History(messages, events)


def _group_4() -> History:
    """billing / invoices, 2026-03-03 hour 00 (default target 60 s)."""
    t = "2026-03-03T"
    return History(
        messages=[
            # m12 one-shot; the first publish failed, the retry (same number) 5 s later worked.
            Msg("m12", "billing", "invoices", "done", ts(t + "00:00:00"),
                confirmed_at=ts(t + "00:00:00"), done_at=ts(t + "00:00:07"), delivery_count=1),
            # m13 one-shot, published, never acked: ack deadline 00:11:01.
            Msg("m13", "billing", "invoices", "sent", ts(t + "00:10:00"),
                confirmed_at=ts(t + "00:10:00"), next_delivery_at=ts(t + "00:11:01"),
                delivery_count=1),
            # m15 done, but its history has no events at all.
            Msg("m15", "billing", "invoices", "done", ts(t + "00:05:00"),
                confirmed_at=ts(t + "00:05:02"), done_at=ts(t + "00:05:09")),
            # m14 confirmed by check-back 30 s before "now": in flight, within target.
            Msg("m14", "billing", "invoices", "sent", ts(t + "00:50:00"),
                confirmed_at=ts(t + "01:59:30"), next_delivery_at=ts(t + "02:00:31"),
                check_count=3, delivery_count=1),
            # m18 pending-send, next check-back 30 s overdue: within the 60 s grace.
            Msg("m18", "billing", "invoices", "pending-send", ts(t + "00:58:00"),
                next_check_at=ts(t + "01:59:30"), check_count=1),
        ],
        events=[
            ev("m12", t + "00:00:00", "sent"),
            ev("m12", t + "00:00:01", "publish-failed", delivery=1, error="timeout"),
            ev("m12", t + "00:00:06", "published", delivery=1),
            ev("m12", t + "00:00:07", "acked", via="ack-topic"),
            ev("m13", t + "00:10:00", "sent"),
            ev("m13", t + "00:10:01", "published", delivery=1),
            ev("m14", t + "00:50:00", "prepared"),
            ev("m14", t + "00:50:10", "checked", attempt=1, outcome="unknown"),
            ev("m14", t + "00:50:30", "checked", attempt=2, outcome="unknown"),
            ev("m14", t + "01:59:30", "checked", attempt=3, outcome="committed"),
            ev("m14", t + "01:59:30", "confirmed", by="check-back"),
            ev("m14", t + "01:59:31", "published", delivery=1),
            ev("m18", t + "00:58:00", "prepared"),
            ev("m18", t + "00:58:10", "checked", attempt=1, outcome="unknown"),
        ],
    )


def _outside_window() -> History:
    """Outside the window: m16 (before it, stuck: listed), m20 (before it, dead: listed), m17
    (after --until: never listed), and an event of a message that does not exist."""
    return History(
        messages=[
            Msg("m16", "shop", "orders.paid", "pending-send", ts("2026-03-01T09:00:00"),
                next_check_at=ts("2026-03-01T09:00:10")),
            Msg("m17", "shop", "orders.paid", "pending-send", ts("2026-03-03T01:30:00"),
                next_check_at=ts("2026-03-03T01:30:10")),
            Msg("m20", "billing", "invoices", "sent", ts("2026-03-01T08:00:00"),
                confirmed_at=ts("2026-03-01T08:00:00"), dead=True,
                dead_reason="delivery-exhausted", delivery_count=2),
        ],
        events=[
            ev("m16", "2026-03-01T09:00:00", "prepared"),
            ev("m17", "2026-03-03T01:30:00", "prepared"),
            ev("m20", "2026-03-01T08:00:00", "sent"),
            ev("m20", "2026-03-01T08:00:01", "published", delivery=1),
            ev("m20", "2026-03-01T08:01:01", "published", delivery=2),
            ev("m20", "2026-03-01T08:03:01", "dead", reason="delivery-exhausted"),
            ev("ghost", "2026-03-02T10:30:00", "published", delivery=1),
        ],
    )


def hand_history() -> History:
    """Everything above; events shuffled so their ids say nothing about their order."""
    parts = [_group_1(), _group_2(), _group_3(), _group_5(), _group_4(), _outside_window()]
    events = [e for p in parts for e in p.events]
    random.Random(7).shuffle(events)
    return History([m for p in parts for m in p.messages], events)


# --- storing a history --------------------------------------------------------------------

_MESSAGE_INSERT = """
INSERT INTO messages (message_id, app, topic, payload, check_url, state, dead, dead_reason,
    check_count, delivery_count, check_after_seconds, max_checks, ack_timeout_seconds,
    max_deliveries, created_at, confirmed_at, done_at, deleted_at, next_check_at,
    next_delivery_at, subscribers, acks)
VALUES ($1, $2, $3, '{}'::jsonb, 'http://127.0.0.1/check', $4, $5, $6, $7, $8, 10, 15, 60, 6,
    $9, $10, $11, $12, $13, $14, $15, $16::jsonb)
"""


async def _store(dsn: str, history: History) -> None:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.executemany(
                "INSERT INTO apps (name, api_key_hash, signing_secret) VALUES ($1, $2, 's')",
                [(app, f"hash-{app}") for app in history.apps])
            await conn.executemany(_MESSAGE_INSERT, [
                (m.message_id, m.app, m.topic, m.state, m.dead, m.dead_reason, m.check_count,
                 m.delivery_count, m.created_at, m.confirmed_at, m.done_at, m.deleted_at,
                 m.next_check_at, m.next_delivery_at, m.subscribers, m.acks_json)
                for m in history.messages])
            await conn.executemany(
                "INSERT INTO message_events (message_id, at, event, actor, detail) "
                "VALUES ($1, $2, $3, $4, $5::jsonb)",
                [(e.message_id, e.at, e.event, e.actor, e.detail_text)
                 for e in history.events])
    finally:
        await conn.close()


def store(dsn: str, history: History) -> None:
    asyncio.run(_store(dsn, history))


def write_export(directory: Path, history: History, *, exported_at: datetime | None = None,
                 with_open: bool = True) -> Path:
    """The history as an ``rms export`` directory (``open`` = every pending-send, sent or
    dead message), without PostgreSQL: for the odd-input tests."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def write(name: str, rows: list[dict[str, Any]], columns: Any) -> None:
        (directory / name).mkdir(parents=True)
        table = pa.Table.from_pylist(rows, schema=arrow_schema(columns))
        pq.write_table(table, directory / name / "part-00000.parquet")

    write("messages", [m.row() for m in history.messages], MESSAGE_COLUMNS)
    write("events", [{"id": i, "message_id": e.message_id, "at": e.at, "event": e.event,
                      "actor": e.actor, "detail": e.detail_text}
                     for i, e in enumerate(history.events, start=1)], EVENT_COLUMNS)
    if with_open:
        opened = [m.row() for m in history.messages
                  if m.dead or m.state in ("pending-send", "sent")]
        write("open", opened, MESSAGE_COLUMNS)
    if exported_at is not None:
        manifest = {"format": "rms-history-export", "version": 1,
                    "exported_at": exported_at.isoformat()}
        (directory / "_export.json").write_text(json.dumps(manifest), encoding="utf-8")
    return directory
