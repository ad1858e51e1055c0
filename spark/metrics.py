"""Aggregating message facts (``spark.facts``) at every grain (``spark.grains``): per app,
topic and hour, per day, per topic over the window, overall, plus the check-back and delivery
histograms.

- Counters (counts, sums, maxima; all additive) are aggregated once per app, topic, hour,
  number of check-backs, number of deliveries and profile (``spark.facts``: the flags and
  codes a message is counted by), a hash aggregation that counts rows and sums six counters;
  the driver turns each profile into its counts and rolls those rows up to every grain: one
  Spark job.
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

from spark.facts import CODES, FLAGS, profile_code, profile_flag
from spark.grains import DISTRIBUTION_POPULATIONS, DISTRIBUTIONS, GRAINS
from spark.keys import KEYS, Pairs
from spark.percentiles import (
    LEVELS,
    STAGE_COLUMNS,
    Selection,
    histogram,
    keyed_values,
    select,
)

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


ROLLED_UP_BY_MAX = frozenset({"checkbacks_max", "deliveries_max", "sla_target_seconds"})
SUMMED = {  # column: the facts' counter it sums
    "checkbacks_committed": "checks_committed", "checkbacks_rolled_back": "checks_rolled_back",
    "checkbacks_unknown": "checks_unknown", "checkbacks_other": "checks_other",
    "publish_failures": "publish_failures", "resends": "resends"}
# the fine counters' columns: every counter but the ratios, and the SLA target
FINE_COLUMNS = (*(c for c in COUNTER_COLUMNS if c not in RATIOS), "sla_target_seconds")


def _aggregates() -> dict[str, Any]:
    """What Spark aggregates per fine group and profile: the messages, the SLA outcomes (the
    target depends on the topic, not on the profile), the per-message counters' sums and the
    SLA target."""
    from pyspark.sql import functions as F

    return {
        "n": F.count(F.lit(1)),
        "sla_met": F.count(F.when(F.col("sla_met"), True)),
        "sla_missed": F.count(F.when(F.col("sla_missed"), True)),
        **{name: F.sum(source) for name, source in SUMMED.items()},
        "sla_target_seconds": F.max("sla_target_seconds"),
    }


def _counts(table: Any) -> dict[str, Any]:
    """The count columns of grouped facts (Arrow: ``n`` messages per ``profile``, ``checks``
    and ``publishes``): per row, ``n`` where the row's messages are counted, else 0."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n, profile = table["n"], table["profile"]
    zero = pa.scalar(0, pa.int64())

    def where(condition: Any) -> Any:
        return pc.if_else(condition, n, zero)

    def flag(name: str) -> Any:
        return profile_flag(profile, name)

    def code(name: str, value: str) -> Any:
        return pc.equal(profile_code(profile, name), CODES[name].index(value) + 1)

    sent_pending = pc.subtract(pc.subtract(where(flag("sent")), table["sla_met"]),
                               table["sla_missed"])
    return {
        "messages": n,
        **{name: where(flag(name)) for name in FLAGS},  # each flag is a count of its name
        "confirmed_by_producer": where(code("confirmed_by", "producer")),
        "confirmed_by_check_back": where(code("confirmed_by", "check-back")),
        "confirmed_by_admin": where(code("confirmed_by", "admin")),
        "cancelled_by_producer": where(code("cancelled_by", "producer")),
        "rolled_back_by_check_back": where(code("cancelled_by", "check-back")),
        "cancelled_by_admin": where(code("cancelled_by", "admin")),
        "dead_check_exhausted": where(code("dead_reason", "check-exhausted")),
        "dead_delivery_exhausted": where(code("dead_reason", "delivery-exhausted")),
        "messages_checked": where(pc.greater(table["checks"], 0)),
        "messages_published": where(pc.greater(table["publishes"], 0)),
        "redelivered_messages": where(pc.greater(table["publishes"], 1)),
        "checkbacks": pc.multiply(pc.cast(table["checks"], pa.int64()), n),
        "deliveries": pc.multiply(pc.cast(table["publishes"], pa.int64()), n),
        "checkbacks_max": table["checks"],
        "deliveries_max": table["publishes"],
        "sla_pending": sent_pending,
    }


def fine_counters(facts: Any, pairs: Pairs) -> Any:
    """The counters per app, topic, hour, number of check-backs and number of deliveries (with
    the SLA target): one Spark job grouped by the integer ``spark.keys.KEYS``, the counters and
    the message's ``profile`` (``spark.facts``), so it counts rows and sums six counters; the
    driver turns each profile into the counts it stands for (Arrow)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    aggregates = _aggregates()
    counted = pairs.keyed(facts).groupBy(*KEYS, "checks", "publishes", "profile").agg(
        *[aggregate.alias(name) for name, aggregate in aggregates.items()]).toArrow()
    table = pairs.restored(counted)
    for key in ("checks", "publishes"):
        table = table.set_column(table.column_names.index(key), key,
                                 pc.cast(table[key], pa.int64()))
    columns = {**_counts(table), **{name: table[name] for name in aggregates if name != "n"}}
    return pa.table({**{key: table[key] for key in FINE_KEYS},
                     **{name: columns[name] for name in FINE_COLUMNS}})


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
    ``pairs``, the window's app and topic pairs): keep them persisted. The histogram runs
    first, alone; the counters' job then runs from a second driver thread while the driver
    ranks the histogram and the wanted values are read, so its tasks fill the cores the
    percentiles leave idle (the driver's share of the work, small final stages)."""
    import pyarrow.compute as pc

    pairs = pairs or Pairs.of(facts)
    values = keyed_values(facts, pairs)
    cells = histogram(values, pairs)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="counters") as pool:
        counting = pool.submit(fine_counters, facts, pairs)
        selection = select(cells, values)
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
