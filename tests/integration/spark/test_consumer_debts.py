"""What each consumer still owes (``stuck`` and ``dead`` of ``spark.consumers``), checked
against a plain recomputation on a generated history: messages with and without subscribers,
acked by some of them, sent with ack deadlines on both sides of the grace, dead, done and
deleted, read from an export and from PostgreSQL over JDBC."""

from __future__ import annotations

import random
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from spark.inputs import JdbcSource, ParquetSource
from spark.report import ReportConfig, run_report
from tests.integration.spark.fixtures import new_database
from tests.integration.spark.history import Ev, History, Msg, store, ts, write_export

pytestmark = pytest.mark.spark

AS_OF = ts("2026-05-10T12:00:00")
GRACE = 60.0
CONSUMERS = ("points", "invoicing", "shipping")
TOPICS = (("shop", "orders.paid"), ("shop", "orders.sent"), ("billing", "invoices"))

Key = tuple[str, str, str]


def _history(rng: random.Random) -> History:
    messages, events = [], []
    for n in range(240):
        app, topic = rng.choice(TOPICS)
        created = AS_OF - timedelta(hours=rng.randint(1, 72), seconds=rng.randint(0, 3599))
        state = rng.choice(("sent", "sent", "sent", "done", "deleted", "pending-send"))
        confirmed = None if state in ("pending-send", "deleted") else created + timedelta(
            seconds=1)
        subscribers = (sorted(rng.sample(CONSUMERS, rng.randint(1, 3)))
                       if confirmed is not None and rng.random() < 0.8 else None)
        acked = ({c: created + timedelta(seconds=rng.randint(2, 600)) for c in subscribers
                  if state == "done" or rng.random() < 0.4} or None if subscribers else None)
        # the ack deadline: well past the grace, just inside it, in the future, or none
        deadline = rng.choice((AS_OF - timedelta(seconds=GRACE + 30),
                               AS_OF - timedelta(seconds=GRACE - 30),
                               AS_OF + timedelta(minutes=5), None))
        message_id = f"d{n}"
        messages.append(Msg(
            message_id, app, topic, state, created, confirmed_at=confirmed,
            done_at=created + timedelta(seconds=700) if state == "done" else None,
            deleted_at=created + timedelta(seconds=5) if state == "deleted" else None,
            next_check_at=AS_OF if state == "pending-send" else None,
            next_delivery_at=deadline if state == "sent" else None,
            dead=state == "sent" and rng.random() < 0.25,
            dead_reason=None, subscribers=subscribers, acks=acked))
        events += [Ev(message_id, at, "acked", {"via": "http"}, actor=f"app:{consumer}")
                   for consumer, at in (acked or {}).items()]
    # a consumer that owes one message and acked nothing
    messages.append(Msg("pager-1", "ops", "alerts", "sent", AS_OF - timedelta(hours=3),
                        confirmed_at=AS_OF - timedelta(hours=3), subscribers=["pager"],
                        next_delivery_at=AS_OF - timedelta(hours=2)))
    for message in messages:
        if message.dead:
            message.dead_reason = "delivery-exhausted"
    return History(messages=messages, events=events)


def _expected(history: History) -> tuple[dict[Key, dict[str, int]], set[Key]]:
    """Per (app, topic, consumer): its stuck and dead debts; and every key with an ack."""
    debts: dict[Key, Counter[str]] = {}
    acked: set[Key] = set()
    cutoff = AS_OF - timedelta(seconds=GRACE)
    for m in history.messages:
        acked |= {(m.app, m.topic, c) for c in m.acks or {}}
        if m.subscribers is None:
            continue
        overdue = m.next_delivery_at is None or m.next_delivery_at < cutoff
        kind = "dead" if m.dead else "stuck" if m.state == "sent" and overdue else None
        if kind is None:
            continue
        for consumer in m.subscribers:
            if consumer not in (m.acks or {}):
                debts.setdefault((m.app, m.topic, consumer), Counter())[kind] += 1
    return {k: {"stuck": c["stuck"], "dead": c["dead"]} for k, c in debts.items()}, acked


def _rows(out: Path) -> dict[Key, dict[str, Any]]:
    return {(r["app"], r["topic"], r["consumer"]): r
            for r in pq.read_table(out / "consumers.parquet").to_pylist()}


def _check(rows: dict[Key, dict[str, Any]], history: History) -> None:
    debts, acked = _expected(history)
    assert set(rows) == set(debts) | acked
    assert {k: {"stuck": r["stuck"], "dead": r["dead"]} for k, r in rows.items()
            if r["stuck"] or r["dead"]} == debts
    owing_only = set(debts) - acked
    assert owing_only, "the history has a consumer that only owes"
    for key in owing_only:
        assert rows[key]["acked"] == 0 and rows[key]["sla_target_seconds"] == 60.0
    assert sum(d["stuck"] for d in debts.values()) and sum(d["dead"] for d in debts.values())


def test_each_consumers_debts_equal_a_recomputation(spark_session: Any, spark_postgres: Any,
                                                    tmp_path: Path) -> None:
    history = _history(random.Random(34))
    export = write_export(tmp_path / "export", history)
    database = new_database(spark_postgres, "spark_debts")
    store(spark_postgres.dsn("spark_debts"), history)
    for name, source in (("parquet", ParquetSource(export)),
                         ("jdbc", JdbcSource(database, partitions=2))):
        run_report(spark_session, ReportConfig(out=tmp_path / name, source=source,
                                               as_of=AS_OF, grace_seconds=GRACE))
        _check(_rows(tmp_path / name), history)


ODD = ["", "not json", "{}", '{"a": 1}', "[1, 2]", "[null]", '"points"', "null", "[[]]",
       '["points", "points"]', "\x00", '{"points": 7}', '{"points": [1]}']


def test_odd_subscribers_and_acks_in_an_export_count_for_no_one_or_as_written(
        spark_session: Any, tmp_path: Path) -> None:
    """An export RMS did not write: subscribers and acks of every odd shape, on stuck
    messages. Each row is judged alone: the report runs, and only a JSON array of names
    owes (less the names in a JSON object of acks)."""
    messages = [Msg(f"odd-{i}-{j}", "shop", "orders.paid", "sent", AS_OF - timedelta(hours=3),
                    confirmed_at=AS_OF - timedelta(hours=3),
                    next_delivery_at=AS_OF - timedelta(hours=2))
                for i in range(len(ODD)) for j in range(len(ODD))]
    rows = [m.row() | {"subscribers": ODD[int(m.message_id.split("-")[1])],
                       "acks": ODD[int(m.message_id.split("-")[2])]} for m in messages]
    export = write_export(tmp_path / "export", History(messages=messages, events=[]))
    import pyarrow as pa

    from history.tables import MESSAGE_COLUMNS, arrow_schema
    for name in ("messages", "open"):
        pq.write_table(pa.Table.from_pylist(rows, schema=arrow_schema(MESSAGE_COLUMNS)),
                       export / name / "part-00000.parquet")
    run_report(spark_session, ReportConfig(out=tmp_path / "out", source=ParquetSource(export),
                                           as_of=AS_OF, grace_seconds=GRACE))
    found = {k[2]: r["stuck"] for k, r in _rows(tmp_path / "out").items()}
    # '["points", "points"]' names points, owed unless the acks are an object naming it (2 of
    # the 13); '[1, 2]' is read as the names "1" and "2" (a JSON number as its text); a null,
    # a nested array and anything not an array name no one
    assert found == {"points": len(ODD) - 2, "1": len(ODD), "2": len(ODD)}
