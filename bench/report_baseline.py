"""The SLA report's plain baseline: its core aggregation as a plain PySpark script, with no RMS
logic, for ``bench.report_bench`` to time beside the report (as ``rms bench`` times RMS beside
its bare server).

    python -m bench.report_baseline --input DIR --out FILE.json [--master local[2]] \\
        [--driver-memory 1g] [--conf KEY=VALUE ...]

Over an ``rms export`` directory it reads ``messages/`` and ``events/``, summarises each
message's events (whether it was prepared or sent, the first time of each event kind, the
counts of check-backs by outcome, of deliveries, failed publishes and resends, the actor of the
first confirm and cancel from the JSON detail), joins that summary to the messages and collects
per app, topic and hour: messages, sent and done, and the exact p50 / p95 / p99 of created ->
done (nearest rank, Spark's ``percentile_disc``); and per app, topic and consumer (the actor of
the ``acked`` events, ``app:`` left off) the messages it acked and the p50 / p95 / p99 of the
message's first publish -> that consumer's first ack. It writes both lists to ``--out`` (JSON:
``{"hourly": [...], "consumers": [...]}``), so the benchmark can check them against the
report's ``hourly.parquet`` and ``consumers.parquet``.

It is a subset of the report's figures (two grains, two latencies, a few counters): the report's
time over the baseline's charges the report for everything it adds (five more grains, three
more stages, every counter, the SLA, the stuck list, the output files). Session settings are
the report's (``spark.session``), so both run on the same Spark configuration.
"""

from __future__ import annotations

import argparse
import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

LEVELS = (0.5, 0.95, 0.99)
COUNTERS = ("checks", "checks_committed", "checks_rolled_back", "checks_unknown", "publishes",
            "publish_failures", "resends")


def _summary(events: Any) -> Any:
    """Per message: flags, first times, counters and actors of its events."""
    from pyspark.sql import functions as F

    event, detail = F.col("event"), F.col("detail")

    def first(name: str) -> Any:
        return F.min(F.when(event == name, F.col("at")))

    def count(condition: Any) -> Any:
        return F.count(F.when(condition, True))

    outcome = F.when(event == "checked", F.get_json_object(detail, "$.outcome"))
    actor = F.when(event.isin("confirmed", "cancelled"), F.get_json_object(detail, "$.by"))
    return events.select("message_id", "at", "event", outcome.alias("outcome"),
                         actor.alias("actor")).groupBy("message_id").agg(
        F.bool_or(event == "prepared").alias("prepared"),
        first("sent").alias("sent_at"), first("confirmed").alias("confirmed_ev_at"),
        first("cancelled").alias("cancelled_at"), first("acked").alias("acked_at"),
        F.min_by("actor", F.when(event == "confirmed", F.col("at"))).alias("confirmed_by"),
        F.min_by("actor", F.when(event == "cancelled", F.col("at"))).alias("cancelled_by"),
        count(event == "checked").alias("checks"),
        *[count(F.col("outcome") == name).alias(f"checks_{name}")
          for name in ("committed", "rolled_back", "unknown")],
        count(event == "published").alias("publishes"),
        count(event == "publish-failed").alias("publish_failures"),
        count(event == "resent").alias("resends"),
    )


def hourly(spark: Any, path: Path) -> Any:
    """Per app, topic and hour: messages, sent, done and created -> done percentiles."""
    from pyspark.sql import functions as F

    messages = spark.read.parquet(str(path / "messages"))
    events = spark.read.parquet(str(path / "events"))
    joined = messages.join(_summary(events), "message_id", "left")
    done_at = F.coalesce(F.col("done_at"), F.col("acked_at"))
    micros = F.unix_micros(done_at) - F.unix_micros(F.col("created_at"))
    latency = F.when(micros < 0, F.lit(0.0)).otherwise(micros / 1_000_000)
    sent = F.coalesce(F.col("confirmed_at"), F.col("confirmed_ev_at"), F.col("sent_at"))
    rows = joined.select("app", "topic", F.date_trunc("hour", "created_at").alias("hour"),
                         sent.isNotNull().alias("is_sent"),
                         ((F.col("state") == "done") | done_at.isNotNull()).alias("is_done"),
                         F.coalesce(F.col("prepared"), F.lit(False)).alias("is_prepared"),
                         F.col("cancelled_at").isNotNull().alias("is_cancelled"),
                         "confirmed_by", "cancelled_by", *COUNTERS, latency.alias("latency"))
    levels = ", ".join(str(level) for level in LEVELS)

    def count(condition: Any) -> Any:
        return F.count(F.when(condition, True))

    return rows.groupBy("app", "topic", "hour").agg(
        F.count(F.lit(1)).alias("messages"), count(F.col("is_prepared")).alias("prepared"),
        count(F.col("is_sent")).alias("sent"), count(F.col("is_done")).alias("done"),
        count(F.col("is_cancelled")).alias("cancelled"),
        *[count(F.col(f"{kind}_by") == actor).alias(f"{kind}_by_{actor}")
          for kind in ("confirmed", "cancelled") for actor in ("producer", "check-back")],
        *[F.sum(name).alias(name) for name in COUNTERS],
        F.count("latency").alias("created_to_done_count"),
        F.expr(f"percentile_disc(array({levels})) WITHIN GROUP (ORDER BY latency)")
        .alias("created_to_done"))


def consumers(spark: Any, path: Path) -> Any:
    """Per app, topic and consumer: messages acked and first publish -> first ack
    percentiles (seconds)."""
    from pyspark.sql import functions as F

    events = spark.read.parquet(str(path / "events"))
    messages = spark.read.parquet(str(path / "messages")).select("message_id", "app", "topic")
    consumer = F.regexp_replace(F.col("actor"), "^app:", "")
    acks = events.where(F.col("event") == "acked").groupBy(
        "message_id", consumer.alias("consumer")).agg(F.min("at").alias("acked_at"))
    published = events.where(F.col("event") == "published").groupBy("message_id").agg(
        F.min("at").alias("published_at"))
    micros = F.unix_micros("acked_at") - F.unix_micros("published_at")
    latency = F.when(micros < 0, F.lit(0.0)).otherwise(micros / 1_000_000)
    rows = messages.join(acks, "message_id").join(published, "message_id", "left").select(
        "app", "topic", "consumer", latency.alias("latency"))
    levels = ", ".join(str(level) for level in LEVELS)
    return rows.groupBy("app", "topic", "consumer").agg(
        F.count(F.lit(1)).alias("acked"), F.count("latency").alias("publish_to_ack_count"),
        F.expr(f"percentile_disc(array({levels})) WITHIN GROUP (ORDER BY latency)")
        .alias("publish_to_ack"))


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()}


def main(argv: list[str] | None = None) -> int:
    from spark.session import SessionSettings, build_session, spark_conf

    parser = argparse.ArgumentParser(prog="python -m bench.report_baseline",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, required=True, help="an `rms export` directory")
    parser.add_argument("--out", type=Path, required=True,
                        help="JSON file of the hourly and per-consumer rows")
    parser.add_argument("--master")
    parser.add_argument("--driver-memory")
    parser.add_argument("--conf", action="append", metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = build_session(SessionSettings(master=args.master, driver_memory=args.driver_memory,
                                          conf=spark_conf(args.conf)))
    try:
        rows = {name: [_plain(row) for row in build(spark, args.input).toArrow().to_pylist()]
                for name, build in (("hourly", hourly), ("consumers", consumers))}
    finally:
        spark.stop()
    args.out.write_text(json.dumps(rows) + "\n")
    print(f"baseline: {len(rows['hourly'])} app/topic/hour rows and {len(rows['consumers'])} "
          f"app/topic/consumer rows written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
