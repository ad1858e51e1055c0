"""The SLA per consumer: for each app, topic and consumer app, how fast that consumer
acknowledged what it was sent.

A message on a topic several services read is acknowledged by each of them on its own
(``docs/design.md``, subscribers): each ack is an ``acked`` event whose actor is the consumer
(``app:<name>``, or the bare name). A message under the single-ack rule (no subscribers) has
one such event and counts for the app that acked it. Per message and consumer the first ack
counts; an ``ack-ignored`` event (an app that was not a subscriber) counts for no one.

Per (app, topic, consumer), over the window's messages (by creation, as every grain):

- ``acked``: messages that consumer acknowledged;
- ``publish_to_ack``: first ``published`` event of the message -> that consumer's first ack,
  in seconds (0 when the ack is dated first), its count and exact nearest-rank p50 / p95 / p99
  (the value at rank ceil(p * n), ranks in integers, as ``spark.percentiles``); a message with
  no recorded publish is left out of the percentiles, not of ``acked``;
- ``sla_met`` / ``sla_missed``: the consumer's ack came within / after the topic's target from
  the message's confirmation (a delayed message's clock starts at its delivery time, as in
  ``spark.facts``); ``sla_compliance`` = met / (met + missed), null if both are 0.

- ``stuck`` / ``dead``: what that consumer still owes at the report's "now", among the
  messages the stuck list looks at (``spark.stuck``: created before ``--until``, whatever
  ``--since``): messages of which it is a subscriber without an ack, ``sent`` and not dead,
  whose ack deadline passed more than ``grace`` seconds ago (or that have none), and messages
  dead while it still owes them. A message under the single-ack rule names no consumer and
  counts for none. A consumer that owes something and acked nothing in the window has a row
  of its own (no acks, no latency).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from rms_client.ids import APP_NAME_PATTERN
from spark.facts import micros_between, topic_target
from spark.percentiles import LEVELS
from spark.stuck import DEAD, UNACKED, stuck_kind

CONSUMER_KEYS = ("app", "topic", "consumer")
CONSUMER_COUNTS = ("acked", "sla_met", "sla_missed")
DEBTS = ("stuck", "dead")
LATENCY = "publish_to_ack"
LATENCY_COLUMNS = (f"{LATENCY}_count", *(f"{LATENCY}_{level}" for level in LEVELS))
CONSUMER_COLUMNS = (*CONSUMER_KEYS, "sla_target_seconds", *CONSUMER_COUNTS, "sla_compliance",
                    *DEBTS, *LATENCY_COLUMNS)


def consumer_name(actor: Any) -> Any:
    """The consumer app of an ``acked`` event's actor: ``app:shop`` -> ``shop``."""
    from pyspark.sql import functions as F

    return F.when(actor.startswith("app:"), F.substring(actor, 5, 1 << 20)).otherwise(actor)


def consumer_acks(messages: Any, events: Any, targets: dict[str, float]) -> Any:
    """One row per message and consumer that acked it: the keys, the latency ``value`` (µs,
    null without a publish), the target and the SLA outcome."""
    from pyspark.sql import functions as F

    col = F.col
    acked = events.where(col("event") == "acked").groupBy(
        "message_id", consumer_name(col("actor")).alias("consumer")).agg(
        F.min("at").alias("acked_at"))
    published = events.where(col("event") == "published").groupBy("message_id").agg(
        F.min("at").alias("published_at"))
    start = F.greatest(col("confirmed_at"), col("deliver_after"))
    rows = (messages.select("message_id", "app", "topic", "confirmed_at", "deliver_after")
            .join(acked, "message_id").join(published, "message_id", "left"))
    target = topic_target(targets)
    late = micros_between(start, col("acked_at"))
    return rows.select(
        *CONSUMER_KEYS,
        micros_between(col("published_at"), col("acked_at")).alias("value"),
        target.alias("sla_target_seconds"),
        F.coalesce(late <= target * 1_000_000, F.lit(False)).alias("sla_met"),
        F.coalesce(late > target * 1_000_000, F.lit(False)).alias("sla_missed"),
    )


def consumer_debts(opened: Any, now: datetime, grace_seconds: float) -> Any:
    """Per (app, topic, consumer) what it owes at ``now`` (``DEBTS``): the stuck list's
    ``unacked`` and ``dead`` messages (``spark.stuck``), their subscribers less their acks."""
    from pyspark.sql import functions as F

    col = F.col
    acked = F.map_keys(F.from_json(col("acks"), "map<string,string>"))  # null before an ack
    owing = F.filter(  # only app names: an export RMS did not write may hold anything
        F.array_except(F.from_json(col("subscribers"), "array<string>"),
                       F.coalesce(acked, F.array().cast("array<string>"))),
        lambda name: name.isNotNull() & name.rlike(APP_NAME_PATTERN))
    kind = stuck_kind(now, grace_seconds)
    owed = opened.where(col("subscribers").isNotNull() & kind.isin(UNACKED, DEAD)).select(
        "app", "topic", kind.alias("kind"), F.explode(owing).alias("consumer"))
    return owed.groupBy(*CONSUMER_KEYS).agg(
        F.count(F.when(col("kind") == UNACKED, True)).alias("stuck"),
        F.count(F.when(col("kind") == DEAD, True)).alias("dead"))


def consumer_table(messages: Any, events: Any, targets: dict[str, float], opened: Any,
                   now: datetime, grace_seconds: float,
                   target_for: Callable[[str], float] | None = None) -> Any:
    """The per-consumer rows (``CONSUMER_COLUMNS``) as an Arrow table sorted by their keys:
    the counts from one aggregation, the percentiles from one numbering of the values per
    group (``_percentiles``), what each owes from the open messages (``consumer_debts``),
    joined on the driver. ``target_for``: the SLA target of a topic not in ``targets`` (of a
    consumer that only owes)."""
    import pyarrow as pa

    rows = consumer_acks(messages, events, targets)
    counts = {_key(row): row for row in _counts(rows).toArrow().to_pylist()}
    debts = {_key(row): row for row in consumer_debts(opened, now, grace_seconds).collect()}
    ranked = _percentiles(rows)
    table = []
    for key in counts.keys() | debts.keys():
        row = counts.get(key) or _no_acks(key, targets, target_for)
        decided = row["sla_met"] + row["sla_missed"]
        owed = debts.get(key)
        table.append({**row, "sla_compliance": row["sla_met"] / decided if decided else None,
                      **{d: owed[d] if owed else 0 for d in DEBTS},
                      **_no_latency(), **ranked.get(key, {})})
    table.sort(key=lambda r: tuple((r[k] is not None, r[k] or "") for k in CONSUMER_KEYS))
    return pa.Table.from_pylist(table, schema=_schema())


def _key(row: Any) -> tuple[Any, ...]:
    return tuple(row[k] for k in CONSUMER_KEYS)


def _no_acks(key: tuple[Any, ...], targets: dict[str, float],
             target_for: Callable[[str], float] | None) -> dict[str, Any]:
    """The counts of a consumer that owes messages but acked none in the window."""
    topic = key[1]
    target = targets.get(topic, target_for(topic) if target_for else None)
    return {**dict(zip(CONSUMER_KEYS, key, strict=True)),
            "sla_target_seconds": target, f"{LATENCY}_count": 0,
            **dict.fromkeys(CONSUMER_COUNTS, 0)}


def _counts(rows: Any) -> Any:
    from pyspark.sql import functions as F

    return rows.groupBy(*CONSUMER_KEYS).agg(
        F.max("sla_target_seconds").alias("sla_target_seconds"),
        F.count(F.lit(1)).alias("acked"),
        F.count(F.when(F.col("sla_met"), True)).alias("sla_met"),
        F.count(F.when(F.col("sla_missed"), True)).alias("sla_missed"),
        F.count("value").alias(f"{LATENCY}_count"))


def _percentiles(rows: Any) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Per group, the p50 / p95 / p99 (seconds): the values at the nearest ranks ceil(p * n)
    (integer arithmetic), the values numbered in order within their group and only the
    ranked rows collected."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    measured = rows.where(F.col("value").isNotNull())
    group = Window.partitionBy(*CONSUMER_KEYS)
    numbered = measured.select(
        *CONSUMER_KEYS, "value",
        F.row_number().over(group.orderBy("value")).alias("rank"),
        F.count(F.lit(1)).over(group).alias("n"))
    ranks = {name: _rank(F.col("n"), level.numerator, level.denominator)
             for name, level in LEVELS.items()}
    wanted = numbered.where(_any_rank(F.col("rank"), list(ranks.values())))
    picked = wanted.select(*CONSUMER_KEYS, "value", "rank",
                           *[rank.alias(f"r_{name}") for name, rank in ranks.items()]).collect()
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in picked:
        key = tuple(row[k] for k in CONSUMER_KEYS)
        entry = found.setdefault(key, {})
        for name in LEVELS:
            if row["rank"] == row[f"r_{name}"]:
                entry[f"{LATENCY}_{name}"] = row["value"] / 1_000_000
    return found


def _rank(n: Any, numerator: int, denominator: int) -> Any:
    """ceil(n * numerator / denominator) in integers."""
    from pyspark.sql import functions as F

    return F.call_function("div", n * numerator + (denominator - 1), F.lit(denominator))


def _any_rank(rank: Any, ranks: list[Any]) -> Any:
    condition = rank == ranks[0]
    for other in ranks[1:]:
        condition = condition | (rank == other)
    return condition


def _no_latency() -> dict[str, Any]:
    return {f"{LATENCY}_{level}": None for level in LEVELS}


def _schema() -> Any:
    import pyarrow as pa

    types = {"sla_target_seconds": pa.float64(), "sla_compliance": pa.float64(),
             **{c: pa.int64() for c in (*CONSUMER_COUNTS, *DEBTS, f"{LATENCY}_count")},
             **{f"{LATENCY}_{level}": pa.float64() for level in LEVELS}}
    return pa.schema([(c, types.get(c, pa.string())) for c in CONSUMER_COLUMNS])
