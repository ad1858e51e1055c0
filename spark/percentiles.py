"""Exact nearest-rank percentiles (p50, p95, p99) of the stage latencies at every SLA grain.

Definition: the p-th percentile of a group's n latencies is the value at rank ceil(p * n) in
ascending order, so it is always an observed latency. Ranks are whole numbers computed with
integers (p is the fraction 1/2, 19/20 or 99/100), so no rounding error can move them.

Method: a selection rather than a sort of every value at every grain (six grains of four
stages would sort 24 copies of the history):

1. Buckets. A latency of v whole microseconds falls in ``bucket(v)``: below 2^(BITS + 1) µs
   every value has a bucket of its own; above, 2^BITS buckets split each power of two (the
   bucket is the value's binary exponent and its BITS bits after the leading one), so the
   values of a bucket are within 1/2^BITS of each other. A larger value never falls in an
   earlier bucket: that property (``tests/spark/test_exact_percentiles.py``) is what makes
   the method exact.
2. Histogram: count, least and greatest value per app, topic, hour, stage and bucket, one
   aggregation of the facts. Counts add up, so every grain's histogram is a roll-up of this
   one (grouping sets over at most a few hundred buckets per app, topic, hour and stage,
   however many messages there are).
3. Ranks: per group and stage, a running count over the buckets in order finds the bucket
   holding rank r and the rank k within it. When k is 1 the answer is the bucket's least
   value, when k is the bucket's count (or the bucket holds a single distinct value) its
   greatest. A group with as many values as one of its parts (a topic's only day, a day's
   only hour) holds the same values and takes that part's answers.
4. Otherwise the facts are read again for the values of the wanted buckets only (a hash-set
   test on stage and bucket, then a join on app, topic, hour, stage and bucket); numbered in
   ascending order within their group and bucket, the k-th is the answer.

Step 4 reads a few percent of the values. Everything else is aggregation, bounded by the
number of groups and buckets, or Spark sorts, which spill to disk: no group's values are held
in memory at once, so memory does not grow with the size of the largest group.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from spark.facts import STAGES, stage_column
from spark.grains import KEY_COLUMNS, SLA_GRAINS, grain_name

LEVELS: dict[str, Fraction] = {"p50": Fraction(1, 2), "p95": Fraction(19, 20),
                               "p99": Fraction(99, 100)}
BITS = 5
CELL = ("app", "topic", "hour", "stage", "bucket")  # one histogram row
GROUP = ("grain", *KEY_COLUMNS, "stage")  # one percentile group: a grain's keys and a stage
STAGE_PARTS = ("count", *LEVELS)
STAGE_COLUMNS = tuple(f"{stage}_{part}" for stage in STAGES for part in STAGE_PARTS)

Keys = tuple[Any, ...]  # the values of a grain's keys, in SLA_GRAINS order


def _exponent(value: Any) -> Any:
    """floor(log2(value)) for a whole number >= 1, exactly: the double logarithm's floor is
    within one of it, and one integer comparison on each side corrects it."""
    from pyspark.sql import functions as F

    guess = F.floor(F.log2(value)).cast("int")
    one = F.lit(1).cast("long")

    def power(exponent: Any) -> Any:
        return F.call_function("shiftleft", one, exponent)

    return guess + F.when(power(guess + 1) <= value, 1).when(power(guess) > value, -1) \
        .otherwise(0)


def bucket(value: Any) -> Any:
    """The bucket of a latency column (whole microseconds, >= 0)."""
    from pyspark.sql import functions as F

    shift = _exponent(value) - BITS  # >= 1 above the cut
    top = F.call_function("shiftright", value, shift)  # the leading BITS + 1 bits
    return F.when(value < (1 << (BITS + 1)), value).otherwise(F.shiftleft(shift, BITS) + top)


def stage_values(facts: Any) -> Any:
    """One row per message and measured stage: app, topic, hour, stage (index in
    ``STAGES``), value (µs) and bucket."""
    from pyspark.sql import functions as F

    pairs = ", ".join(f"{index}, `{stage_column(stage)}`" for index, stage in enumerate(STAGES))
    rows = facts.select("app", "topic", "hour",
                        F.expr(f"stack({len(STAGES)}, {pairs}) AS (stage, value)"))
    return rows.where(F.col("value").isNotNull()).withColumn("bucket", bucket(F.col("value")))


def _histogram(values: Any) -> Any:
    from pyspark.sql import functions as F

    return values.groupBy(*CELL).agg(F.count(F.lit(1)).alias("n"),
                                     F.min("value").alias("low"), F.max("value").alias("high"))


def _rolled_up(histogram: Any) -> Any:
    """The histogram of every SLA grain's groups (``grain`` names the grain; keys a grain
    does not have are null): the hourly one as it is, the others rolled up from it."""
    from pyspark.sql import functions as F

    columns = (*KEY_COLUMNS, "stage", "bucket")
    coarse = {name: (*keys, "stage", "bucket") for name, keys in SLA_GRAINS.items()
              if name != "hourly"}
    rolled = histogram.withColumn("day", F.to_date("hour")).groupingSets(
        [list(keys) for keys in coarse.values()], *columns).agg(
        F.sum("n").alias("n"), F.min("low").alias("low"), F.max("high").alias("high"),
        F.grouping_id().alias("gid"))
    hourly = histogram.select(F.lit("hourly").alias("grain"), "app", "topic", "hour",
                              F.lit(None).cast("date").alias("day"), "stage", "bucket", "n",
                              "low", "high")
    return hourly.unionByName(rolled.select(grain_name(coarse, columns).alias("grain"),
                                            *columns, "n", "low", "high"))


def _ranked(rolled: Any) -> Any:
    """The buckets that hold a percentile: group, stage, bucket, its count, least and greatest
    value, the group's count (``total``) and, per level, the rank within the bucket of the
    level's value (``k_<level>``; null when the level's value is in another bucket)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ordered = Window.partitionBy(*GROUP).orderBy("bucket")  # one window: one sort, one pass
    running = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    whole = ordered.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    counted = rolled.select("*", F.sum("n").over(running).alias("through"),
                            F.sum("n").over(whole).alias("total"))
    before = F.col("through") - F.col("n")
    ranks = {}
    for name, level in LEVELS.items():
        rank = F.call_function("div", F.col("total") * level.numerator + (level.denominator - 1),
                               F.lit(level.denominator))
        ranks[f"k_{name}"] = F.when((before < rank) & (rank <= F.col("through")), rank - before)
    return counted.select(*GROUP, "bucket", "n", "low", "high", "total",
                          *[k.alias(name) for name, k in ranks.items()]).where(
        F.coalesce(*[F.col(name) for name in ranks]).isNotNull())


Group = tuple[str, Keys, int]  # grain, its key values, stage
Target = tuple[str, int, int, int, int, int]  # level, k, bucket, its count, least, greatest
# each grain's next coarser grains (a group of the finer is part of one group of each)
PARENTS: dict[str, tuple[str, ...]] = {"hourly": ("daily", "hours"), "daily": ("topics", "days"),
                                       "hours": ("days",), "topics": ("totals",),
                                       "days": ("totals",)}


def _parent_keys(grain: str, keys: Keys, parent: str) -> Keys:
    values = dict(zip(SLA_GRAINS[grain], keys, strict=True))
    if "hour" in values:
        values["day"] = values["hour"].date()  # hours are UTC instants, days UTC dates
    return tuple(values[key] for key in SLA_GRAINS[parent])


@dataclass
class Selection:
    """Per group: the stage's count, the buckets holding its percentiles and, once known, the
    answers (µs). A group with as many values as one of its parts holds the same values, so
    it takes that part's answers (``same``: one day of a topic is the whole topic when the
    window spans one day)."""

    counts: dict[Group, int] = field(default_factory=dict)
    targets: dict[Group, list[Target]] = field(default_factory=lambda: defaultdict(list))
    same: dict[Group, Group] = field(default_factory=dict)
    answers: dict[tuple[Group, str], int] = field(default_factory=dict)
    # (grain, the four key columns, stage, bucket) -> {k: levels}, of the groups still open
    wanted: dict[tuple[str, Keys, int, int], dict[int, list[str]]] = field(
        default_factory=lambda: defaultdict(dict))

    def add(self, row: dict[str, Any]) -> None:
        """A row of ``_ranked``."""
        group = (row["grain"], tuple(row[key] for key in SLA_GRAINS[row["grain"]]),
                 row["stage"])
        self.counts[group] = row["total"]
        self.targets[group] += [(level, row[f"k_{level}"], row["bucket"], row["n"], row["low"],
                                 row["high"]) for level in LEVELS if row[f"k_{level}"] is not None]

    def resolve(self) -> None:
        """Pairs equal groups, then answers each remaining group's percentiles from its
        buckets' bounds where they tell (k = 1: the least; k = the bucket's count, or a
        bucket of one value: the greatest) and lists the other buckets as wanted."""
        self._pair_equal_groups()
        for group, targets in self.targets.items():
            if group in self.same:
                continue
            grain, keys, stage = group
            for level, k, bucket_, n, low, high in targets:
                if k == 1 or k == n or low == high:
                    self.answers[(group, level)] = low if k == 1 else high
                else:
                    cell = (grain, self._key_columns(grain, keys), stage, bucket_)
                    self.wanted[cell].setdefault(k, []).append(level)

    def _pair_equal_groups(self) -> None:
        for grain in SLA_GRAINS:  # finest first
            for group in [g for g in self.counts if g[0] == grain]:
                _, keys, stage = group
                for parent in PARENTS.get(grain, ()):
                    above = (parent, _parent_keys(grain, keys, parent), stage)
                    if above not in self.same and self.counts.get(above) == self.counts[group]:
                        self.same[above] = self.same.get(group, group)

    @staticmethod
    def _key_columns(grain: str, keys: Keys) -> Keys:
        values = dict(zip(SLA_GRAINS[grain], keys, strict=True))
        return tuple(values.get(key) for key in KEY_COLUMNS)

    def found(self, row: dict[str, Any]) -> None:
        """A row of ``_kth_values``: the k-th value of a wanted bucket."""
        grain, stage = row["grain"], row["stage"]
        cell = (grain, tuple(row[key] for key in KEY_COLUMNS), stage, row["bucket"])
        group = (grain, tuple(row[key] for key in SLA_GRAINS[grain]), stage)
        for level in self.wanted[cell][row["k"]]:
            self.answers[(group, level)] = row["value"]

    def wanted_table(self) -> Any:
        """The wanted buckets as an Arrow table: group keys, stage, bucket and the ranks."""
        import pyarrow as pa

        rows = [dict(zip(KEY_COLUMNS, keys, strict=True)) | {
            "grain": grain, "stage": stage, "bucket": bucket_, "ks": sorted(ranks)}
            for (grain, keys, stage, bucket_), ranks in self.wanted.items()]
        schema = pa.schema([("grain", pa.string()), ("app", pa.string()), ("topic", pa.string()),
                            ("hour", pa.timestamp("us", tz="UTC")), ("day", pa.date32()),
                            ("stage", pa.int32()), ("bucket", pa.int64()),
                            ("ks", pa.list_(pa.int64()))])
        return pa.Table.from_pylist(rows, schema=schema)

    def stage_columns(self, grain: str, keys: Keys) -> dict[str, Any]:
        """The ``<stage>_count`` / ``<stage>_<level>`` values (seconds) of one group."""
        columns: dict[str, Any] = {}
        for index, stage in enumerate(STAGES):
            group = (grain, keys, index)
            columns[f"{stage}_count"] = self.counts.get(group, 0)
            for level in LEVELS:
                micros = self.answers.get((self.same.get(group, group), level))
                columns[f"{stage}_{level}"] = None if micros is None else micros / 1_000_000
        return columns


def _in_buckets(frame: Any, buckets: set[tuple[int, int]]) -> Any:
    """The rows of ``frame`` whose (stage, bucket) is one of ``buckets``: a hash-set test on
    one number, before anything costlier looks at them."""
    from pyspark.sql import functions as F

    packed = F.col("stage").cast("long") * (1 << 32) + F.col("bucket")
    return frame.where(packed.isin(sorted((stage << 32) + b for stage, b in buckets)))


def _wanted_cells(histogram: Any, wanted: Any) -> Any:
    """Histogram cells inside a wanted bucket, each with its group (``g_`` keys) and ranks."""
    from pyspark.sql import functions as F

    types = {"app": "string", "topic": "string", "hour": "timestamp", "day": "date"}
    groups = F.array(*[F.struct(F.lit(name).alias("grain"), *[
        (F.col(key) if key in keys else F.lit(None).cast(types[key])).alias(f"g_{key}")
        for key in KEY_COLUMNS]) for name, keys in SLA_GRAINS.items()])
    cells = histogram.withColumn("day", F.to_date("hour")).select(
        *CELL, F.explode(groups).alias("group")).select(*CELL, "group.*").alias("c")
    targets = wanted.select("grain", *[F.col(k).alias(f"g_{k}") for k in KEY_COLUMNS],
                            "stage", "bucket", "ks").alias("w")
    on = [F.col(f"c.{c}") == F.col(f"w.{c}") for c in ("grain", "stage", "bucket")] + [
        F.col(f"c.g_{k}").eqNullSafe(F.col(f"w.g_{k}")) for k in KEY_COLUMNS]
    return cells.join(F.broadcast(targets), on).select(
        *[F.col(f"c.{c}") for c in CELL], "c.grain", *[f"c.g_{k}" for k in KEY_COLUMNS], "w.ks")


def _kth_values(values: Any, cells: Any) -> Any:
    """The k-th smallest value of every wanted bucket, for each of its ranks k."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    candidates = values.join(F.broadcast(cells), list(CELL))
    group = ["grain", *[f"g_{k}" for k in KEY_COLUMNS], "stage", "bucket"]
    numbered = candidates.select(*group, "ks", "value", F.row_number().over(
        Window.partitionBy(*group).orderBy("value")).alias("k"))
    return numbered.where(F.array_contains("ks", F.col("k"))).select(
        "grain", *[F.col(f"g_{k}").alias(k) for k in KEY_COLUMNS], "stage", "bucket", "k",
        "value")


def stage_percentiles(facts: Any) -> Selection:
    """Counts and exact percentiles of every stage at every SLA grain (two Spark jobs over
    ``facts``, which the caller should keep persisted)."""
    from pyspark import StorageLevel

    values = stage_values(facts)
    histogram = _histogram(values).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        selection = Selection()
        for row in _ranked(_rolled_up(histogram)).toArrow().to_pylist():
            selection.add(row)
        selection.resolve()
        if selection.wanted:
            buckets = {(stage, bucket_) for _, _, stage, bucket_ in selection.wanted}
            wanted = facts.sparkSession.createDataFrame(selection.wanted_table())
            cells = _wanted_cells(_in_buckets(histogram, buckets), wanted)
            for row in _kth_values(_in_buckets(values, buckets), cells).toArrow().to_pylist():
                selection.found(row)
        return selection
    finally:
        histogram.unpersist()
