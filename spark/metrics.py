"""Aggregating message facts (``spark.facts``) at every grain: per app, topic and hour, per
day, per topic over the window, overall, plus the check-back and delivery histograms.

Two aggregations of the facts, joined per group into one result (one Spark job; the shuffle
that builds the facts is shared):

- counters (counts, sums, maxima; all additive) are aggregated once per app, topic, hour,
  number of check-backs and number of deliveries (a hash aggregation on few columns), then
  rolled up to every grain from those few thousand rows;
- percentiles need every value at every grain: ``percentile_approx`` over grouping sets, on
  rows narrowed to the grain keys and the four stage latencies.

Percentiles are exact, by the nearest-rank definition: the p-th percentile of n values is the
value at rank ceil(p * n) in ascending order (so always an observed latency). ``percentile_approx``
with an accuracy above any group's size keeps every value in its summary and answers the rank
exactly (``tests/spark/test_percentiles.py`` checks it against a sort). That costs memory and
time in proportion to the values; ``--percentile-accuracy N`` trades exactness for bounded
memory on huge windows (rank error at most n / N).

Every count is a number (0 for an empty group); a ratio or percentile with nothing to measure
is null: ``checkbacks_per_message`` (per prepared message), ``deliveries_per_message`` (per
message with at least one ``published`` event), ``sla_compliance`` (met / (met + missed)).
"""

from __future__ import annotations

from typing import Any

from spark.facts import STAGES

EXACT_ACCURACY = 2**31 - 1
KEY_COLUMNS = ("app", "topic", "hour", "day")
# histogram grains: grouped by a per-message counter, read with the population's count column
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "checkbacks_per_message": ("checks",),  # read with "prepared"
    "deliveries_per_message": ("publishes",),  # read with "sent"
}
FINE_KEYS = (*KEY_COLUMNS, "checks", "publishes")
PERCENTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
COUNT_COLUMNS = (
    "messages", "prepared", "one_shot", "sent", "confirmed_by_producer",
    "confirmed_by_check_back", "confirmed_by_admin", "cancelled", "cancelled_by_producer",
    "rolled_back_by_check_back", "cancelled_by_admin", "done", "pending_send", "unacked", "dead",
    "dead_check_exhausted", "dead_delivery_exhausted",
)
CHECKBACK_COLUMNS = (
    "checkbacks", "checkbacks_committed", "checkbacks_rolled_back", "checkbacks_unknown",
    "messages_checked", "checkbacks_per_message", "checkbacks_max",
)
DELIVERY_COLUMNS = (
    "deliveries", "messages_published", "deliveries_per_message", "deliveries_max",
    "redelivered_messages", "publish_failures", "resends",
)
SLA_COLUMNS = ("sla_met", "sla_missed", "sla_pending", "sla_compliance")
STAGE_COLUMNS = tuple(f"{stage}_{part}" for stage in STAGES for part in ("count", *PERCENTILES))
RATIO_COLUMNS = ("checkbacks_per_message", "deliveries_per_message", "sla_compliance")
METRIC_COLUMNS = COUNT_COLUMNS + CHECKBACK_COLUMNS + DELIVERY_COLUMNS + SLA_COLUMNS + STAGE_COLUMNS


def _count_conditions() -> dict[str, Any]:
    from pyspark.sql import functions as F

    col = F.col

    def by(column: str, actor: str) -> Any:
        return col(column) == actor

    return {
        "messages": F.lit(True),
        "prepared": col("is_prepared"),
        "one_shot": col("is_one_shot"),
        "sent": col("is_sent"),
        "confirmed_by_producer": by("confirmed_by", "producer"),
        "confirmed_by_check_back": by("confirmed_by", "check-back"),
        "confirmed_by_admin": by("confirmed_by", "admin"),
        "cancelled": col("is_cancelled"),
        "cancelled_by_producer": col("is_cancelled") & by("cancelled_by", "producer"),
        "rolled_back_by_check_back": col("is_cancelled") & by("cancelled_by", "check-back"),
        "cancelled_by_admin": col("is_cancelled") & by("cancelled_by", "admin"),
        "done": col("is_done"),
        "pending_send": col("is_pending_send"),
        "unacked": col("is_unacked"),
        "dead": col("is_dead"),
        "dead_check_exhausted": by("dead_reason", "check-exhausted"),
        "dead_delivery_exhausted": by("dead_reason", "delivery-exhausted"),
        "messages_checked": col("checks") > 0,
        "messages_published": col("publishes") > 0,
        "redelivered_messages": col("publishes") > 1,
        "sla_met": col("sla_met"),
        "sla_missed": col("sla_missed"),
        "sla_pending": col("is_sent") & ~col("sla_met") & ~col("sla_missed"),
    }


def _additive() -> dict[str, tuple[Any, str]]:
    """Per counter: (aggregate over facts, how the partial results roll up)."""
    from pyspark.sql import functions as F

    counters: dict[str, tuple[Any, str]] = {
        name: (F.count(F.when(cond, True)), "sum") for name, cond in _count_conditions().items()
    }
    for name, source in (("checkbacks", "checks"), ("checkbacks_committed", "checks_committed"),
                         ("checkbacks_rolled_back", "checks_rolled_back"),
                         ("checkbacks_unknown", "checks_unknown"), ("deliveries", "publishes"),
                         ("publish_failures", "publish_failures"), ("resends", "resends")):
        counters[name] = (F.sum(source), "sum")
    counters["checkbacks_max"] = (F.max("checks"), "max")
    counters["deliveries_max"] = (F.max("publishes"), "max")
    counters["sla_target_seconds"] = (F.max("sla_target_seconds"), "max")
    return counters


def _grain_names(grains: dict[str, tuple[str, ...]], columns: tuple[str, ...]) -> Any:
    """A ``grain`` column naming the grouping set of each row (from ``grouping_id()``)."""
    from pyspark.sql import functions as F

    width = len(columns)
    names = None
    for name, keys in grains.items():
        gid = sum(1 << (width - 1 - i) for i, c in enumerate(columns) if c not in keys)
        names = (F.when(F.col("gid") == gid, F.lit(name)) if names is None
                 else names.when(F.col("gid") == gid, F.lit(name)))
    return names


def _counters(facts: Any, grains: dict[str, tuple[str, ...]]) -> Any:
    from pyspark.sql import functions as F

    additive = _additive()
    fine = facts.groupBy(*FINE_KEYS).agg(*[agg.alias(n) for n, (agg, _) in additive.items()])
    rollups = [(F.sum if how == "sum" else F.max)(name).alias(name)
               for name, (_, how) in additive.items()]
    rolled = fine.groupingSets([list(keys) for keys in grains.values()], *FINE_KEYS).agg(
        *rollups, F.grouping_id().alias("gid"))
    return rolled.select(_grain_names(grains, FINE_KEYS).alias("grain"), *FINE_KEYS,
                         *additive)


def _percentiles(facts: Any, grains: dict[str, tuple[str, ...]], accuracy: int) -> Any:
    from pyspark.sql import functions as F

    narrow = facts.select(*KEY_COLUMNS, *STAGES)
    stages = [agg for stage in STAGES for agg in (
        F.count(stage).alias(f"{stage}_count"),
        F.percentile_approx(stage, list(PERCENTILES.values()), accuracy).alias(f"{stage}_pct"),
    )]
    grouped = narrow.groupingSets([list(keys) for keys in grains.values()], *KEY_COLUMNS).agg(
        *stages, F.grouping_id().alias("gid"))
    return grouped.select(_grain_names(grains, KEY_COLUMNS).alias("grain"), *KEY_COLUMNS,
                          *[c for stage in STAGES for c in (f"{stage}_count", f"{stage}_pct")])


def _finish() -> list[Any]:
    """The metric columns: counters as they are, ratios from them, percentile arrays split."""
    from pyspark.sql import functions as F

    col = F.col
    ratios = {
        "checkbacks_per_message": F.try_divide(col("checkbacks"), col("prepared")),
        "deliveries_per_message": F.try_divide(col("deliveries"), col("messages_published")),
        "sla_compliance": F.try_divide(col("sla_met"), col("sla_met") + col("sla_missed")),
    }
    doubles = ratios | {f"{stage}_{name}": col(f"{stage}_pct")[index]
                        for stage in STAGES for index, name in enumerate(PERCENTILES)}
    columns = []
    for name in METRIC_COLUMNS:
        if name in doubles:
            columns.append(doubles[name].cast("double").alias(name))
        elif name.endswith("_count"):  # a stage's count: 0 where no group had a value
            columns.append(F.coalesce(col(name), F.lit(0)).cast("long").alias(name))
        else:
            columns.append(col(name).cast("long").alias(name))
    return columns


def aggregate_grains(facts: Any, grains: dict[str, tuple[str, ...]],
                     accuracy: int = EXACT_ACCURACY) -> dict[str, Any]:
    """One Arrow table per grain: a row per value of its keys (one row overall for ``()``),
    sorted by the keys. Grains keyed by ``topic`` also carry ``sla_target_seconds``;
    ``DISTRIBUTIONS`` grains are (value, messages) histograms."""
    import pyarrow.compute as pc

    counters = _counters(facts, grains).alias("c")
    sla_grains = {n: k for n, k in grains.items() if n not in DISTRIBUTIONS}
    percentiles = _percentiles(facts, sla_grains, accuracy).alias("p")
    on = [counters["grain"] == percentiles["grain"]] + [
        counters[key].eqNullSafe(percentiles[key]) for key in KEY_COLUMNS]
    joined = counters.join(percentiles, on, "left").select(
        "c.grain", *[f"c.{key}" for key in FINE_KEYS], "c.sla_target_seconds",
        *[f"c.{name}" for name in METRIC_COLUMNS
          if name not in STAGE_COLUMNS and name not in RATIO_COLUMNS],
        *[f"p.{stage}_{part}" for stage in STAGES for part in ("count", "pct")])
    table = joined.select("grain", *FINE_KEYS, "sla_target_seconds", *_finish()).toArrow()
    result = {}
    for name, keys in grains.items():
        rows = table.filter(pc.equal(table["grain"], name))
        if name in DISTRIBUTIONS:
            result[name] = _histogram(rows, keys[0])
            continue
        target = ["sla_target_seconds"] if "topic" in keys else []
        rows = rows.select([*keys, *target, *METRIC_COLUMNS])
        result[name] = rows.sort_by([(key, "ascending") for key in keys]) if keys else (
            rows if rows.num_rows else _nothing(rows.schema))
    return result


def _histogram(rows: Any, value: str) -> Any:
    """(value, messages) of the population: prepared messages for check-backs, sent messages
    for deliveries."""
    import pyarrow.compute as pc

    population = "prepared" if value == "checks" else "sent"
    kept = rows.filter(pc.greater(rows[population], 0)).sort_by(value)
    return kept.select([value, population]).rename_columns(["value", "messages"])


def _nothing(schema: Any) -> Any:
    """The overall row of an empty window (grouping sets give no row for no input): every
    count 0, every ratio and percentile null."""
    import pyarrow as pa

    row = {f.name: 0 if pa.types.is_integer(f.type) else None for f in schema}
    return pa.Table.from_pylist([row], schema=schema)
