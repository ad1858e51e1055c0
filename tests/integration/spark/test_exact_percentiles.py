"""The percentile method of ``spark/percentiles.py``, checked against a plain sort at every
grain and stage: a history whose latencies crowd into a few buckets (so most percentiles are
picked among a bucket's values), with exact ties, spread over two days, several hours, apps and
topics, some groups equal to one of their parts (one hour of a topic is its whole day). And the
property the method rests on: a larger latency never falls in an earlier bucket."""

from __future__ import annotations

import math
import random
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from history.options import Window
from spark.facts import message_facts
from spark.inputs import ParquetSource, load_history
from spark.keys import Pairs
from spark.percentiles import (
    MAX_BITS,
    MIN_BITS,
    Selection,
    bits_for,
    bucket,
    histogram,
    keyed_values,
    select,
)
from spark.report import ReportConfig, run_report
from tests.integration.spark.history import Ev, History, Msg, ts, write_export

pytestmark = pytest.mark.spark

STAGES = ("prepare_to_confirm", "confirm_to_first_publish", "first_publish_to_done",
          "prepare_to_done")
LEVELS = {"p50": 0.5, "p95": 0.95, "p99": 0.99}


def stage_percentiles(facts: Any, pairs: Pairs | None = None,
                      bits: int | None = None) -> Selection:
    """Counts and exact percentiles of every stage at every SLA grain, as the report finds
    them: the histogram, then the values of the wanted buckets."""
    pairs = pairs or Pairs.of(facts)
    values = keyed_values(facts, pairs, bits)
    return select(histogram(values, pairs), values)
AS_OF = ts("2026-05-10T00:00:00")
# (app, topic) -> the (day, hour) slots it has messages in. Equal groups: each day of
# shop/refunds is one hour; billing/credits is one day; billing/refunds is one hour in all.
SLOTS = {
    ("shop", "orders"): [("2026-05-01", 9), ("2026-05-01", 10), ("2026-05-02", 9)],
    ("shop", "refunds"): [("2026-05-01", 10), ("2026-05-02", 11)],
    ("billing", "credits"): [("2026-05-01", 9), ("2026-05-01", 10)],
    ("billing", "invoices"): [("2026-05-01", 9), ("2026-05-02", 9), ("2026-05-02", 11)],
    ("billing", "refunds"): [("2026-05-02", 11)],
}


def reference_bucket(value: int, bits: int) -> int:
    """An independent statement of the bucket: the value itself below 2^(bits + 1), else the
    binary exponent and the ``bits`` bits after the leading one."""
    if value < 1 << (bits + 1):
        return value
    shift = value.bit_length() - 1 - bits
    return (shift << bits) + (value >> shift)


@pytest.mark.parametrize("bits", range(MIN_BITS, MAX_BITS + 1))
def test_buckets_never_decrease_and_match_their_definition(spark_session: Any,
                                                           bits: int) -> None:
    rng = random.Random(7)
    values = set(range(300))
    for exponent in range(6, 62):  # every power of two and its neighbours: float log2 edges
        values |= {(1 << exponent) - 1, 1 << exponent, (1 << exponent) + 1}
    values |= {rng.randrange(1 << rng.randrange(7, 45)) for _ in range(5000)}
    frame = spark_session.createDataFrame([(v,) for v in sorted(values)], "value long")
    rows = frame.select("value", bucket(frame["value"], bits).alias("bucket")).collect()
    buckets = {row["value"]: row["bucket"] for row in rows}
    assert buckets == {v: reference_bucket(v, bits) for v in values}
    ordered = [buckets[v] for v in sorted(values)]
    assert ordered == sorted(ordered)
    members: dict[int, list[int]] = defaultdict(list)
    for value, number in buckets.items():
        members[number].append(value)
    for peers in members.values():  # a bucket spans at most 1/2^bits of its least value
        assert max(peers) - min(peers) <= min(peers) >> bits


def test_buckets_per_doubling_follow_the_messages_per_group() -> None:
    assert bits_for(0, 0) == MIN_BITS
    assert bits_for(100, 10) == MIN_BITS
    assert [bits_for(n, 480) for n in (1_000_000, 2_000_000, 5_000_000, 100_000_000)] == [
        3, 3, 4, 6]
    assert bits_for(10**12, 1) == MAX_BITS
    chosen = [bits_for(n, 100) for n in range(0, 10**8, 10**6)]
    assert chosen == sorted(chosen)


def _latency(rng: random.Random) -> int:
    """Microseconds: most in one narrow band (a few buckets), some tied, some spread."""
    draw = rng.random()
    if draw < 0.55:
        return 1_000_000 + rng.randrange(40_000)
    if draw < 0.7:
        return 250_000
    return int(10 ** rng.uniform(3, 8))


def _history(rng: random.Random) -> tuple[History, dict[tuple[str, ...], list[int]]]:
    messages: list[Msg] = []
    events: list[Ev] = []
    stages: dict[tuple[str, ...], list[int]] = {}
    for (app, topic), slots in SLOTS.items():
        for day, hour in slots:
            start = ts(f"{day}T{hour:02d}:00:00")
            for i in range(rng.randrange(40, 90)):
                mid = f"{app}-{topic}-{day}-{hour}-{i}"
                created = start + timedelta(microseconds=rng.randrange(3_500_000_000))
                a, b, c = _latency(rng), _latency(rng), _latency(rng)
                confirmed = created + timedelta(microseconds=a)
                published = confirmed + timedelta(microseconds=b)
                done = published + timedelta(microseconds=c)
                messages.append(Msg(mid, app, topic, "done", created, confirmed_at=confirmed,
                                    done_at=done))
                events += [Ev(mid, created, "prepared"),
                           Ev(mid, confirmed, "confirmed", {"by": "producer"}),
                           Ev(mid, published, "published", {"delivery": 1}),
                           Ev(mid, done, "acked", {"via": "http"})]
                stages[(mid, app, topic, day, f"{hour:02d}")] = [a, b, c, a + b + c]
    return History(messages, events), stages


GRAIN_FIELDS = {"hourly": ("app", "topic", "hour"), "daily": ("app", "topic", "day"),
                "topics": ("app", "topic"), "hours": ("hour",), "days": ("day",), "totals": ()}


def _expected(stages: dict[tuple[str, ...], list[int]]) -> dict[str, dict[Any, dict[str, Any]]]:
    """Per grain and group: count and nearest-rank percentiles of each stage, in seconds."""
    values: dict[str, dict[Any, list[list[int]]]] = {g: defaultdict(lambda: [[], [], [], []])
                                                     for g in GRAIN_FIELDS}
    for (_, app, topic, day, hour), latencies in stages.items():
        fields = {"app": app, "topic": topic, "day": day, "hour": f"{day}T{hour}"}
        for grain, names in GRAIN_FIELDS.items():
            for index, latency in enumerate(latencies):
                values[grain][tuple(fields[name] for name in names)][index].append(latency)
    expected: dict[str, dict[Any, dict[str, Any]]] = {}
    for grain, groups in values.items():
        expected[grain] = {}
        for key, per_stage in groups.items():
            row: dict[str, Any] = {}
            for stage, measured in zip(STAGES, per_stage, strict=True):
                ordered = sorted(measured)
                row[f"{stage}_count"] = len(ordered)
                for name, level in LEVELS.items():
                    row[f"{stage}_{name}"] = ordered[math.ceil(level * len(ordered)) - 1] / 1e6
            expected[grain][key] = row
    return expected


def _key(grain: str, row: dict[str, Any]) -> tuple[str, ...]:
    """A table row's group, as ``_expected`` names it."""
    fields = {"app": row.get("app"), "topic": row.get("topic")}
    if isinstance(row.get("hour"), datetime):
        fields["hour"] = row["hour"].strftime("%Y-%m-%dT%H")
    if isinstance(row.get("day"), date):
        fields["day"] = row["day"].isoformat()
    return tuple(str(fields[name]) for name in GRAIN_FIELDS[grain])


def _stages(row: dict[str, Any]) -> dict[str, Any]:
    return {f"{stage}_{part}": row[f"{stage}_{part}"]
            for stage in STAGES for part in ("count", *LEVELS)}


def _flat(summary_row: dict[str, Any]) -> dict[str, Any]:
    return {f"{stage}_{part}": value for stage, parts in summary_row["stages"].items()
            for part, value in parts.items()}


def test_every_grain_and_stage_equals_a_sort(spark_session: Any, tmp_path: Path) -> None:
    history, stages = _history(random.Random(11))
    source = write_export(tmp_path / "export", history)
    expected = _expected(stages)
    summary = run_report(spark_session, ReportConfig(out=tmp_path / "out",
                                                     source=ParquetSource(source), as_of=AS_OF))
    for grain in ("hourly", "daily", "topics"):
        rows = pq.read_table(tmp_path / "out" / f"{grain}.parquet").to_pylist()
        assert {_key(grain, row): _stages(row) for row in rows} == expected[grain], grain
    hours = {(h["hour"][:13],): _flat(h) for h in summary["hours"]}
    assert hours == expected["hours"]
    assert {(d["day"],): _flat(d) for d in summary["days"]} == expected["days"]
    assert _flat(summary["totals"]) == expected["totals"][()]


def test_the_method_looks_into_buckets_and_pairs_equal_groups(spark_session: Any,
                                                              tmp_path: Path) -> None:
    """The history above exercises both shortcuts: percentiles picked among a bucket's
    values (``wanted``), and groups answered by an equal part (``same``)."""
    history, _ = _history(random.Random(11))
    source = write_export(tmp_path / "export", history)
    loaded = load_history(spark_session, ParquetSource(source), Window())
    selection = stage_percentiles(message_facts(loaded.messages, loaded.events, AS_OF))
    assert {grain for grain, *_ in selection.wanted} == {
        "hourly", "daily", "topics", "hours", "days", "totals"}
    same = {(above[0], below[0]) for above, below in selection.same.items()}
    assert ("daily", "hourly") in same  # shop/refunds: each day is one hour
    assert ("topics", "daily") in same  # billing/credits: its one day is the whole topic
    assert ("topics", "hourly") in same  # billing/refunds: one hour is all of it


@pytest.mark.parametrize("bits", [0, MIN_BITS, 5, MAX_BITS])
def test_every_number_of_buckets_gives_the_same_answers(spark_session: Any, tmp_path: Path,
                                                        bits: int) -> None:
    """Exactness does not depend on the buckets' width: with one bucket per doubling as with
    256, every group's answers equal a sort."""
    history, stages = _history(random.Random(11))
    source = write_export(tmp_path / "export", history)
    expected = _expected(stages)
    loaded = load_history(spark_session, ParquetSource(source), Window())
    selection = stage_percentiles(message_facts(loaded.messages, loaded.events, AS_OF),
                                  bits=bits)
    for grain, groups in expected.items():
        for key, row in groups.items():
            values = dict(zip(GRAIN_FIELDS[grain], key, strict=True))
            keys = tuple(_typed(name, values[name]) for name in GRAIN_FIELDS[grain])
            assert selection.stage_columns(grain, keys) == row, (grain, key)


def _typed(name: str, value: str) -> Any:
    """A group key of ``_expected`` as the selection holds it."""
    if name == "hour":
        return datetime.strptime(value, "%Y-%m-%dT%H").replace(tzinfo=UTC)
    if name == "day":
        return date.fromisoformat(value)
    return value


CONSUMERS = ("points", "invoicing", "shipping")


def _consumer_history(rng: random.Random) -> tuple[History, dict[tuple[str, ...], list[Any]]]:
    """The history above with one to three consumers acking each message on their own instead
    of its one ack (some acks dated before the publish, every consumer acking twice, an
    ``ack-ignored`` app, a message never published), and per (app, topic, consumer) what each
    first ack measured: (publish -> ack µs or None, confirm -> ack µs)."""
    history, _ = _history(rng)
    published = {e.message_id: e.at for e in history.events if e.event == "published"}
    confirmed = {m.message_id: m.confirmed_at for m in history.messages}
    unpublished = history.messages[7].message_id
    history.events = [e for e in history.events if e.event != "acked"
                      and not (e.message_id == unpublished and e.event == "published")]
    measured: dict[tuple[str, ...], list[Any]] = defaultdict(list)
    for message in history.messages:
        mid = message.message_id
        first = published[mid]
        for consumer in rng.sample(CONSUMERS, rng.randint(1, 3)):
            at = first + timedelta(microseconds=_latency(rng) - 50_000)
            again = at + timedelta(microseconds=_latency(rng))
            history.events += [Ev(mid, at, "acked", {"via": "topic"}, actor=f"app:{consumer}"),
                               Ev(mid, again, "acked", {"via": "http"}, actor=consumer)]
            late = confirmed[mid]
            assert late is not None
            measured[(message.app, message.topic, consumer)].append((
                None if mid == unpublished else max(0, _micros(at - first)),
                max(0, _micros(at - late))))
        history.events.append(Ev(mid, first, "ack-ignored", {"via": "http"}, actor="app:late"))
    return history, measured


def _micros(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _expected_consumer(measured: list[Any]) -> dict[str, Any]:
    """One group's row, recomputed: counts, SLA against the default 60 s, nearest ranks."""
    latencies = sorted(value for value, _ in measured if value is not None)
    met = sum(1 for _, late in measured if late <= 60_000_000)
    row: dict[str, Any] = {"sla_target_seconds": 60.0, "acked": len(measured), "sla_met": met,
                           "sla_missed": len(measured) - met,
                           "sla_compliance": met / len(measured),
                           "stuck": 0, "dead": 0,  # no message names subscribers
                           "publish_to_ack_count": len(latencies)}
    for name, level in LEVELS.items():
        row[f"publish_to_ack_{name}"] = latencies[math.ceil(level * len(latencies)) - 1] / 1e6
    return row


def test_every_consumer_group_equals_a_sort(spark_session: Any, tmp_path: Path) -> None:
    history, measured = _consumer_history(random.Random(12))
    source = write_export(tmp_path / "export", history)
    summary = run_report(spark_session, ReportConfig(out=tmp_path / "out",
                                                     source=ParquetSource(source), as_of=AS_OF))
    expected = {key: _expected_consumer(values) for key, values in measured.items()}
    rows = pq.read_table(tmp_path / "out" / "consumers.parquet").to_pylist()
    found = {(r.pop("app"), r.pop("topic"), r.pop("consumer")): r for r in rows}
    assert found == expected
    assert any(row["sla_missed"] for row in expected.values())
    assert len(summary["consumers"]) == len(expected)
    assert "late" not in {row["consumer"] for row in summary["consumers"]}
