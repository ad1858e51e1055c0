"""Aggregating message facts (``spark.facts``) at every grain (``spark.grains``): per app,
topic and hour, per day, per topic over the window, overall, plus the check-back and delivery
histograms.

- Counters (counts, sums, maxima; all additive) are aggregated once per app, topic, hour,
  number of check-backs and number of deliveries (a hash aggregation on few columns), then
  rolled up to every grain from those few thousand rows: one Spark job.
- Stage counts and percentiles come from ``spark.percentiles`` (exact nearest-rank: the value
  at rank ceil(p * n) in ascending order), and join the counters per group on the driver.

Every count is a number (0 for an empty group); a ratio or percentile with nothing to measure
is null. Ratios (``RATIOS``) and their populations: ``checkbacks_per_message`` = checkbacks /
prepared, ``deliveries_per_message`` = deliveries / messages_published (messages with at least
one ``published`` event), ``sla_compliance`` = met / (met + missed). The histograms count other
populations (``spark.grains.DISTRIBUTION_POPULATIONS``): check-backs per *prepared* message,
deliveries per *sent* message (0 for a sent message never published). The check-back outcome
columns add up to ``checkbacks``: ``checkbacks_other`` counts the outcomes that are none of
committed, rolled_back and unknown (or missing).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from spark.grains import DISTRIBUTION_POPULATIONS, DISTRIBUTIONS, GRAINS
from spark.keys import KEYS, Pairs
from spark.percentiles import LEVELS, STAGE_COLUMNS, Selection, stage_percentiles

FINE_KEYS = ("app", "topic", "hour", "checks", "publishes")
PERCENTILES = {name: float(level) for name, level in LEVELS.items()}
COUNT_COLUMNS = (
    "messages", "prepared", "one_shot", "sent", "confirmed_by_producer",
    "confirmed_by_check_back", "confirmed_by_admin", "cancelled", "cancelled_by_producer",
    "rolled_back_by_check_back", "cancelled_by_admin", "done", "pending_send", "unacked", "dead",
    "dead_check_exhausted", "dead_delivery_exhausted", "delayed", "scheduled",
)
CHECKBACK_COLUMNS = (
    "checkbacks", "checkbacks_committed", "checkbacks_rolled_back", "checkbacks_unknown",
    "checkbacks_other", "messages_checked", "checkbacks_per_message", "checkbacks_max",
)
DELIVERY_COLUMNS = (
    "deliveries", "messages_published", "deliveries_per_message", "deliveries_max",
    "redelivered_messages", "publish_failures", "resends",
)
SLA_COLUMNS = ("sla_met", "sla_missed", "sla_pending", "sla_compliance")
# ratio -> (numerator, columns whose sum is the denominator)
RATIOS: dict[str, tuple[str, tuple[str, ...]]] = {
    "checkbacks_per_message": ("checkbacks", ("prepared",)),
    "deliveries_per_message": ("deliveries", ("messages_published",)),
    "sla_compliance": ("sla_met", ("sla_met", "sla_missed")),
}
METRIC_COLUMNS = COUNT_COLUMNS + CHECKBACK_COLUMNS + DELIVERY_COLUMNS + SLA_COLUMNS + STAGE_COLUMNS
COUNTER_COLUMNS = tuple(c for c in METRIC_COLUMNS if c not in STAGE_COLUMNS)


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
        "delayed": col("is_delayed"),
        "scheduled": col("is_scheduled"),
        "messages_checked": col("checks") > 0,
        "messages_published": col("publishes") > 0,
        "redelivered_messages": col("publishes") > 1,
        "sla_met": col("sla_met"),
        "sla_missed": col("sla_missed"),
        "sla_pending": col("is_sent") & ~col("sla_met") & ~col("sla_missed"),
    }


ROLLED_UP_BY_MAX = frozenset({"checkbacks_max", "deliveries_max", "sla_target_seconds"})


def _fine_aggregates() -> dict[str, Any]:
    """Per counter (and the SLA target): its aggregate over the facts of one fine group.
    Every one rolls up to coarser groups by a sum, those in ``ROLLED_UP_BY_MAX`` by a max."""
    from pyspark.sql import functions as F

    aggregates = {name: F.count(F.when(cond, True)) for name, cond in _count_conditions().items()}
    for name, source in (("checkbacks", "checks"), ("checkbacks_committed", "checks_committed"),
                         ("checkbacks_rolled_back", "checks_rolled_back"),
                         ("checkbacks_unknown", "checks_unknown"),
                         ("checkbacks_other", "checks_other"), ("deliveries", "publishes"),
                         ("publish_failures", "publish_failures"), ("resends", "resends")):
        aggregates[name] = F.sum(source)
    aggregates["checkbacks_max"] = F.max("checks")
    aggregates["deliveries_max"] = F.max("publishes")
    aggregates["sla_target_seconds"] = F.max("sla_target_seconds")
    return aggregates


def fine_counters(facts: Any, pairs: Pairs) -> Any:
    """The counters per app, topic, hour, number of check-backs and number of deliveries: one
    Spark job (grouped by the integer ``spark.keys.KEYS``), a few thousand rows (an Arrow
    table)."""
    aggregates = _fine_aggregates()
    counted = pairs.keyed(facts).groupBy(*KEYS, "checks", "publishes").agg(
        *[aggregate.alias(name) for name, aggregate in aggregates.items()]).toArrow()
    return pairs.restored(counted).select([*FINE_KEYS, *aggregates])


def rolled_up(fine: Any, keys: tuple[str, ...]) -> Any:
    """The fine counters per ``keys`` (one row for ``()``, none when there is nothing), the
    counts as longs and the ratios (``RATIOS``) from them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = [c for c in fine.column_names if c not in FINE_KEYS and c != "day"]
    how = {name: "max" if name in ROLLED_UP_BY_MAX else "sum" for name in names}
    if keys:
        grouped = fine.group_by(list(keys)).aggregate([(name, how[name]) for name in names])
        named = {f"{name}_{how[name]}": name for name in names}  # pyarrow names them so
        grouped = grouped.rename_columns([named.get(c, c) for c in grouped.column_names])
    elif fine.num_rows:
        grouped = pa.table({name: [getattr(pc, how[name])(fine[name]).as_py()] for name in names},
                           schema=pa.schema([fine.schema.field(name) for name in names]))
    else:
        grouped = fine.select(names).slice(0, 0)
    return _with_ratios(grouped)


def _with_ratios(table: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    for name, (numerator, denominator) in RATIOS.items():
        below = table[denominator[0]]
        for column in denominator[1:]:
            below = pc.add(below, table[column])
        ratio = pc.if_else(pc.equal(below, 0), pa.scalar(None, pa.float64()),
                           pc.divide(pc.cast(table[numerator], pa.float64()),
                                     pc.cast(below, pa.float64())))
        table = table.append_column(pa.field(name, pa.float64()), ratio)
    return table


def aggregate_grains(facts: Any, grains: dict[str, tuple[str, ...]] = GRAINS,
                     pairs: Pairs | None = None) -> dict[str, Any]:
    """One Arrow table per grain: a row per value of its keys (one row overall for ``()``),
    sorted by the keys. Grains keyed by ``topic`` also carry ``sla_target_seconds``;
    ``DISTRIBUTIONS`` grains are (value, messages) histograms. ``facts`` (with the SLA
    columns of ``spark.facts.with_sla``) are read by three Spark jobs (four without
    ``pairs``, the window's app and topic pairs): keep them persisted. The counters' job runs
    beside the percentiles' (from a second driver thread), so its tasks fill the cores the
    percentiles leave idle (small final stages, the driver's share of the work)."""
    import pyarrow.compute as pc

    pairs = pairs or Pairs.of(facts)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="counters") as pool:
        counting = pool.submit(fine_counters, facts, pairs)
        selection = stage_percentiles(facts, pairs)
        fine = counting.result()
    fine = fine.append_column("day", pc.cast(fine["hour"], "date32"))
    result = {}
    for name, keys in grains.items():
        rows = rolled_up(fine, keys)
        if name in DISTRIBUTIONS:
            result[name] = _histogram(rows, keys[0], DISTRIBUTION_POPULATIONS[name])
            continue
        target = ["sla_target_seconds"] if "topic" in keys else []
        rows = _with_stages(rows.select([*keys, *target, *COUNTER_COLUMNS]), name, keys,
                            selection)
        result[name] = rows.sort_by([(key, "ascending") for key in keys]) if keys else (
            rows if rows.num_rows else _nothing(rows.schema))
    return result


def _with_stages(rows: Any, grain: str, keys: tuple[str, ...], selection: Selection) -> Any:
    """``rows`` with the stage columns of each group, the metric columns in
    ``METRIC_COLUMNS`` order."""
    import pyarrow as pa

    groups = [tuple(row[key] for key in keys) for row in rows.select(list(keys)).to_pylist()] \
        if keys else [()] * rows.num_rows
    stages = [selection.stage_columns(grain, group) for group in groups]
    for name in STAGE_COLUMNS:
        count = name.endswith("_count")  # a number, 0 when nothing was measured
        kind = pa.int64() if count else pa.float64()
        rows = rows.append_column(pa.field(name, kind, nullable=not count),
                                  pa.array([s[name] for s in stages], kind))
    return rows


def _histogram(rows: Any, value: str, population: str) -> Any:
    """(value, messages) of the population's messages."""
    import pyarrow.compute as pc

    kept = rows.filter(pc.greater(rows[population], 0)).sort_by(value)
    return kept.select([value, population]).rename_columns(["value", "messages"])


def _nothing(schema: Any) -> Any:
    """The overall row of an empty window (grouping sets give no row for no input): every
    count 0, every ratio and percentile null."""
    import pyarrow as pa

    row = {f.name: 0 if pa.types.is_integer(f.type) else None for f in schema}
    return pa.Table.from_pylist([row], schema=schema)
