"""A synthetic but realistic message history, written straight to Parquet in the ``rms export``
layout (``messages/``, ``events/``, ``open/``, ``_export.json``), for the report benchmark.

Vectorised with pyarrow.compute (no per-message Python), chunk by chunk, so millions of
messages take seconds and bounded memory. The mix, per message:

- 25 % one-shot sends, 75 % prepared; of the prepared: 86 % confirmed by the producer
  (prepare->confirm log-normal, median 50 ms), 5 % committed and 2 % rolled back by check-back
  after 1-4 unknown answers (check-backs at 10, 30, 70, 150 s ... as the confirm service
  backs off), 5 % cancelled by the producer, 1 % check-exhausted (15 unknown check-backs,
  dead), 1 % still pending-send and overdue;
- of the sent: 1 % have a failed publish first (retried 5 s later); 94 % are acked after the
  first delivery, 5.3 % after 2-5 deliveries (ack timeout 60 s, doubling), 0.5 % die
  delivery-exhausted after 6 deliveries, 0.2 % are still unacked; confirm->publish median
  5 ms, publish->ack median 200 ms (log-normal);
- consumers: the topics are read by one, two or three consumer apps in turn (``points``,
  then ``invoicing``, then ``shipping``); ``points`` acks as above (it is the one that lets a
  message die or stay unacked), each other consumer of the topic acks every delivered message
  once, publish->ack median 150 ms after the last delivery (log-normal), never after the
  message is done. Every ``acked`` event names its consumer (actor ``app:<name>``).

Messages are spread evenly over ``hours`` from 2026-01-05T00:00Z across 5 apps and 20 topics.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from history.tables import EVENT_COLUMNS, MESSAGE_COLUMNS, arrow_schema

START = datetime(2026, 1, 5, tzinfo=UTC)
SECOND = 1_000_000  # microseconds
APPS = [f"app{i}" for i in range(5)]
TOPICS = [f"{app}.topic{j}" for app in APPS for j in range(4)]
CONSUMERS = ["points", "invoicing", "shipping"]  # topic t is read by the first 1 + t % 3
CHECK_OFFSETS = [sum(min(10 * 2**i, 300) for i in range(j + 1)) for j in range(15)]
ACK_OFFSETS = [sum(min(60 * 2**i, 1800) for i in range(d)) for d in range(6)]
TS = pa.timestamp("us", tz="UTC")
NULL_US = pa.scalar(None, pa.int64())


class Draw:
    """Seeded uniform, normal and log-normal draws, one array per call."""

    def __init__(self, n: int, seed: int) -> None:
        self.n = n
        self._seed = seed

    def uniform(self) -> Any:
        self._seed += 1
        return pc.random(self.n, initializer=self._seed)

    def lognormal_us(self, median_s: float, sigma: float) -> Any:
        """Microseconds, log-normal (Box-Muller on two uniforms)."""
        u1 = pc.subtract(1.0, self.uniform())  # (0, 1]: ln is finite
        radius = pc.sqrt(pc.multiply(-2.0, pc.ln(u1)))
        normal = pc.multiply(radius, pc.cos(pc.multiply(2 * math.pi, self.uniform())))
        seconds = pc.multiply(median_s, pc.exp(pc.multiply(sigma, normal)))
        return _micros(seconds)


def _micros(seconds: Any) -> Any:
    return pc.cast(pc.floor(pc.multiply(seconds, SECOND)), pa.int64())


def _pick(u: Any, shares: list[float]) -> Any:
    """Category index per draw: ``shares`` are probabilities of categories 0..k-1."""
    index = pa.array([0] * len(u), pa.int64())
    edge = 0.0
    for share in shares[:-1]:
        edge += share
        index = pc.add(index, pc.cast(pc.greater_equal(u, edge), pa.int64()))
    return index


def _mod(values: Any, divisor: int) -> Any:
    """``values % divisor`` for non-negative integers."""
    return pc.subtract(values, pc.multiply(pc.divide(values, divisor), divisor))


def _lookup(values: list[Any], index: Any) -> Any:
    """``values[index]`` for every element, with Python constants."""
    return pc.take(pa.array(values), index)


@dataclass
class Chunk:
    columns: dict[str, Any]  # message columns, timestamps as int64 microseconds
    events: list[Any]  # tables of (message_id, at, event, detail)


# prepared paths
P_PRODUCER, P_COMMIT, P_ROLLBACK, P_CANCEL, P_EXHAUSTED, P_PENDING = range(6)
PREPARED_SHARES = [0.86, 0.05, 0.02, 0.05, 0.01, 0.01]
# delivery outcomes: acked after 1..5 deliveries, dead after 6, unacked in flight
DELIVERY_SHARES = [0.94, 0.03, 0.015, 0.005, 0.003, 0.005, 0.002]
D_DEAD, D_INFLIGHT = 5, 6


def _slot(mask: Any, ids: Any, at: Any, event: str, detail: Any, actor: str = "rms") -> Any:
    """The events of one kind for the messages where ``mask`` holds."""
    kept = ids.filter(mask)
    n = len(kept)
    return pa.table({
        "message_id": kept,
        "at": at.filter(mask),
        "event": pa.repeat(event, n),
        "actor": pa.repeat(actor, n),
        "detail": detail.filter(mask) if isinstance(detail, pa.Array) else pa.repeat(detail, n),
    })


def _checks(c: dict[str, Any], path: Any, draw: Draw, ids: Any) -> list[Any]:
    """Check-back events and the message's confirm/cancel decision time."""
    unknowns = pc.add(1, pc.cast(pc.floor(pc.multiply(draw.uniform(), 4)), pa.int64()))
    decided = pc.is_in(path, pa.array([P_COMMIT, P_ROLLBACK]))
    count = pc.if_else(decided, pc.add(unknowns, 1), 0)
    count = pc.if_else(pc.equal(path, P_EXHAUSTED), 15, count)
    count = pc.if_else(pc.equal(path, P_PENDING), 1, count)
    c["check_count"] = pc.cast(count, pa.int32())
    slots = []
    for j in range(15):
        at = pc.add(c["created_at"], CHECK_OFFSETS[j] * SECOND)
        last = pc.and_(decided, pc.equal(count, j + 1))
        outcome = pc.if_else(pc.and_(last, pc.equal(path, P_COMMIT)), "committed",
                             pc.if_else(last, "rolled_back", "unknown"))
        detail = pc.binary_join_element_wise(f'{{"attempt": {j + 1}, "outcome": "', outcome,
                                             '"}', "")
        slots.append(_slot(pc.greater(count, j), ids, at, "checked", detail))
    last_check = pc.take(pa.array(CHECK_OFFSETS), pc.max_element_wise(pc.subtract(count, 1), 0))
    c["decided_at"] = pc.add(c["created_at"], pc.multiply(last_check, SECOND))
    return slots


def _creation(c: dict[str, Any], draw: Draw, ids: Any) -> tuple[Any, Any, list[Any]]:
    """Kind and prepared path; returns (one_shot, path, events)."""
    one_shot = pc.less(draw.uniform(), 0.25)
    path = pc.if_else(one_shot, -1, _pick(draw.uniform(), PREPARED_SHARES))
    events = [_slot(one_shot, ids, c["created_at"], "sent", "{}"),
              _slot(pc.invert(one_shot), ids, c["created_at"], "prepared", "{}")]
    events += _checks(c, path, draw, ids)
    producer_at = pc.add(c["created_at"], draw.lognormal_us(0.05, 1.0))
    by_check = pc.is_in(path, pa.array([P_COMMIT, P_ROLLBACK]))
    decision_at = pc.if_else(by_check, c["decided_at"], producer_at)
    confirmed = pc.is_in(path, pa.array([P_PRODUCER, P_COMMIT]))
    cancelled = pc.is_in(path, pa.array([P_CANCEL, P_ROLLBACK]))
    by = pc.if_else(by_check, '{"by": "check-back"}', '{"by": "producer"}')
    events += [_slot(confirmed, ids, decision_at, "confirmed", by),
               _slot(cancelled, ids, decision_at, "cancelled", by)]
    c["confirmed_at"] = pc.if_else(one_shot, c["created_at"],
                                   pc.if_else(confirmed, decision_at, NULL_US))
    c["deleted_at"] = pc.if_else(cancelled, decision_at, NULL_US)
    return one_shot, path, events


def _deliveries(c: dict[str, Any], sent: Any, draw: Draw, ids: Any) -> list[Any]:
    outcome = _pick(draw.uniform(), DELIVERY_SHARES)
    deliveries = pc.if_else(pc.less(outcome, D_DEAD), pc.add(outcome, 1),
                            pc.if_else(pc.equal(outcome, D_DEAD), 6, 1))
    deliveries = pc.if_else(sent, deliveries, 0)
    failed_first = pc.and_(sent, pc.less(draw.uniform(), 0.01))
    first = pc.add(c["confirmed_at"], draw.lognormal_us(0.005, 0.8))
    events = [_slot(failed_first, ids, first, "publish-failed",
                    '{"delivery": 1, "error": "timeout"}')]
    first = pc.if_else(failed_first, pc.add(first, 5 * SECOND), first)
    for d in range(6):
        at = pc.add(first, ACK_OFFSETS[d] * SECOND)
        events.append(_slot(pc.greater(deliveries, d), ids, at, "published",
                            f'{{"delivery": {d + 1}}}'))
    last = pc.add(first, pc.multiply(pc.take(pa.array(ACK_OFFSETS),
                                             pc.max_element_wise(pc.subtract(deliveries, 1), 0)),
                                     SECOND))
    done = pc.and_(sent, pc.less(outcome, D_DEAD))
    dead = pc.and_(sent, pc.equal(outcome, D_DEAD))
    c["done_at"] = pc.if_else(done, pc.add(last, draw.lognormal_us(0.2, 1.0)), NULL_US)
    c["dead_delivery"] = dead
    c["dead_at"] = pc.add(last, 1800 * SECOND)
    c["next_delivery_at"] = pc.if_else(pc.and_(sent, pc.equal(outcome, D_INFLIGHT)),
                                       pc.add(last, 60 * SECOND), NULL_US)
    c["delivery_count"] = pc.cast(deliveries, pa.int32())
    events += [_slot(done, ids, c["done_at"], "acked", '{"via": "ack-topic"}',
                     f"app:{CONSUMERS[0]}"),
               _slot(dead, ids, c["dead_at"], "dead", '{"reason": "delivery-exhausted"}')]
    delivered = pc.or_(done, dead)
    for index, consumer in enumerate(CONSUMERS[1:], start=1):
        reads = pc.and_(delivered, pc.greater_equal(c["consumers"], index + 1))
        at = pc.add(last, draw.lognormal_us(0.15, 1.0))
        at = pc.if_else(done, pc.min_element_wise(at, c["done_at"]), at)
        events.append(_slot(reads, ids, at, "acked", '{"via": "ack-topic"}', f"app:{consumer}"))
    return events


def _state(c: dict[str, Any], path: Any, sent: Any) -> None:
    exhausted = pc.equal(path, P_EXHAUSTED)
    pending = pc.or_(exhausted, pc.equal(path, P_PENDING))
    c["dead"] = pc.or_(exhausted, c["dead_delivery"])
    no_reason = pa.scalar(None, pa.string())
    c["dead_reason"] = pc.if_else(exhausted, "check-exhausted",
                                  pc.if_else(c["dead_delivery"], "delivery-exhausted", no_reason))
    c["state"] = pc.if_else(pending, "pending-send", pc.if_else(
        pc.is_valid(c["deleted_at"]), "deleted",
        pc.if_else(pc.is_valid(c["done_at"]), "done", "sent")))
    c["next_check_at"] = pc.if_else(pc.equal(path, P_PENDING),
                                    pc.add(c["created_at"], 30 * SECOND), NULL_US)
    c["next_delivery_at"] = pc.if_else(sent, c["next_delivery_at"], NULL_US)


def generate_chunk(offset: int, n: int, step_us: float, seed: int) -> Chunk:
    """Messages ``offset .. offset + n - 1``, created ``step_us`` apart."""
    draw = Draw(n, seed)
    index = pa.array(range(offset, offset + n), pa.int64())
    ids = pc.binary_join_element_wise("msg-", pc.cast(index, pa.string()), "")
    topic = pc.cast(pc.floor(pc.multiply(draw.uniform(), len(TOPICS))), pa.int64())
    start_us = int(START.timestamp()) * SECOND
    c: dict[str, Any] = {
        "message_id": ids,
        "topic": _lookup(TOPICS, topic),
        "app": _lookup(APPS, pc.divide(topic, 4)),
        "consumers": pc.add(1, _mod(topic, len(CONSUMERS))),  # how many read the topic
        "created_at": pc.add(start_us, _micros(pc.multiply(pc.cast(index, pa.float64()),
                                                           step_us / SECOND))),
    }
    _, path, events = _creation(c, draw, ids)
    sent = pc.is_valid(c["confirmed_at"])
    events += _deliveries(c, sent, draw, ids)
    _state(c, path, sent)
    exhausted = pc.equal(path, P_EXHAUSTED)
    events.append(_slot(exhausted, ids, c["decided_at"], "dead",
                        '{"reason": "check-exhausted"}'))
    return Chunk(c, events)


def _message_table(c: dict[str, Any]) -> Any:
    schema = arrow_schema(MESSAGE_COLUMNS)
    n = len(c["message_id"])
    defaults = {"key": None, "payload": "{}", "headers": "{}",
                "check_url": "https://shop.example/rms/check", "delivery_base": 0,
                "check_after_seconds": 10.0, "max_checks": 15, "ack_timeout_seconds": 60.0,
                "max_deliveries": 6, "deliver_after": None, "traceparent": None,
                "tracestate": None, "ordered": False, "confirm_seq": None,
                "transaction_id": None, "transaction_position": None, "subscribers": None,
                "acks": None}
    arrays = []
    for f in schema:
        value = c[f.name] if f.name in c else pa.repeat(pa.scalar(defaults[f.name], f.type), n)
        arrays.append(pc.cast(value, f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _event_table(slots: list[Any], first_id: int) -> Any:
    table = pa.concat_tables(slots)
    n = table.num_rows
    return pa.table({
        "id": pa.array(range(first_id, first_id + n), pa.int64()),
        "message_id": table["message_id"],
        "at": pc.cast(table["at"], TS),
        "event": table["event"],
        "actor": table["actor"],
        "detail": table["detail"],
    }, schema=arrow_schema(EVENT_COLUMNS))


@dataclass
class Generated:
    messages: int
    events: int
    open: int


def generate(out: Path, messages: int, hours: int = 24, chunk: int = 250_000,
             seed: int = 1) -> Generated:
    """Writes the history into ``out`` (which must not exist yet)."""
    for name in ("messages", "events", "open"):
        (out / name).mkdir(parents=True)
    step_us = hours * 3600 * SECOND / max(messages, 1)  # created_at grows with the index
    counts = Generated(0, 0, 0)
    for part, offset in enumerate(range(0, messages, chunk)):
        size = min(chunk, messages - offset)
        generated = generate_chunk(offset, size, step_us, seed * 1_000_003 + part)
        table = _message_table(generated.columns)
        events = _event_table(generated.events, counts.events + 1)
        opened = table.filter(pc.or_(table["dead"], pc.is_in(
            table["state"], pa.array(["pending-send", "sent"]))))
        for name, data in (("messages", table), ("events", events), ("open", opened)):
            pq.write_table(data, out / name / f"part-{part:05d}.parquet")
        counts.messages += table.num_rows
        counts.events += events.num_rows
        counts.open += opened.num_rows
    exported_at = START + timedelta(hours=hours + 1)
    manifest = {"format": "rms-history-export", "version": 1, "generator": "bench.history_gen",
                "exported_at": exported_at.isoformat().replace("+00:00", "Z"),
                "since": None, "until": None,
                "tables": {"messages": {"rows": counts.messages},
                           "events": {"rows": counts.events}, "open": {"rows": counts.open}}}
    (out / "_export.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(generate(args.out, args.messages, args.hours, seed=args.seed))


if __name__ == "__main__":
    main()
