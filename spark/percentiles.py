"""Exact nearest-rank percentiles (p50, p95, p99) of the stage latencies at every SLA grain.

Definition: the p-th percentile of a group's n latencies is the value at rank ceil(p * n) in
ascending order, so it is always an observed latency. Ranks are whole numbers computed with
integers (p is the fraction 1/2, 19/20 or 99/100), so no rounding error can move them.

Method: a selection rather than a sort of every value at every grain (six grains of four
stages would sort 24 copies of the history):

1. Buckets. A latency of v whole microseconds falls in ``bucket(v, bits)``: below
   2^(bits + 1) µs every value has a bucket of its own; above, 2^bits buckets split each
   power of two (the bucket is the value's binary exponent and its ``bits`` bits after the
   leading one), so the values of a bucket are within 1/2^bits of each other. A larger value
   never falls in an earlier bucket, whatever ``bits``: that property
   (``tests/integration/spark/test_exact_percentiles.py``) is what makes the method exact. ``bits``
   follows the messages per group (``bits_for``): it only moves work between steps 2 and 4.
2. Histogram: count, least and greatest value per app, topic, hour, stage and bucket, one
   aggregation of the facts (grouped by the integer keys of ``spark.keys``), collected to the
   driver: at most 2^bits buckets per doubling of a latency per app, topic, hour and stage,
   however many messages there are. Counts add up, so every grain's histogram is a roll-up
   of this one (an Arrow group-by on the driver).
3. Ranks, on the driver: per group and stage, a running count over the buckets in order
   finds the bucket holding rank r and the rank k within it. When k is 1 the answer is the
   bucket's least value, when k is the bucket's count (or the bucket holds a single distinct
   value) its greatest. A group with as many values as one of its parts (a topic's only day,
   a day's only hour) holds the same values and takes that part's answers.
4. Otherwise the facts are read again for the values of the wanted buckets only (a hash-set
   test on stage and bucket, then a broadcast join on the histogram cells that make up a
   wanted bucket), collected as (cell, value) pairs; sorted, each wanted bucket's values are
   its cells' runs (merged when it spans several cells), and the k-th is the answer.

Two Spark jobs over the facts, then. Step 4 reads a share of the values that shrinks as
``bits`` grows (16 bytes each on the driver: about 270,000 at 1 M messages); the histogram
is bounded by the number of groups and buckets. With ``bits_for`` both grow with the square
root of messages times groups.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from spark.facts import STAGES, stage_column
from spark.grains import KEY_COLUMNS, SLA_GRAINS
from spark.keys import KEYS, Pairs

LEVELS: dict[str, Fraction] = {"p50": Fraction(1, 2), "p95": Fraction(19, 20),
                               "p99": Fraction(99, 100)}
MIN_BITS, MAX_BITS = 2, 8
CELL = (*KEYS, "stage", "bucket")  # one histogram row: app and topic, hour, stage, bucket
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


def bits_for(messages: int, groups: int) -> int:
    """The buckets per doubling (2^bits) for ``messages`` spread over ``groups`` app, topic and
    hour groups. Finer buckets make more histogram cells (about ``groups`` * 2^bits per stage),
    coarser ones more values to read back (the wanted buckets hold about ``messages`` / 2^bits
    values), so the cheapest choice grows with the square root of the messages per group:
    2^bits ≈ sqrt(messages per group) / 8, from 2 bits up to 8 (measured with
    ``bench.report_bench``: 3 bits were the fastest at 2,000 and 4,000 messages per group)."""
    per_group = messages / max(groups, 1)
    wanted = math.log2(max(per_group, 1.0)) / 2 - 3
    return min(MAX_BITS, max(MIN_BITS, round(wanted)))


def bucket(value: Any, bits: int) -> Any:
    """The bucket of a latency column (whole microseconds, >= 0) with 2^``bits`` buckets per
    doubling."""
    from pyspark.sql import functions as F

    shift = _exponent(value) - bits  # >= 1 above the cut
    top = F.call_function("shiftright", value, shift)  # the leading bits + 1 bits
    return F.when(value < (1 << (bits + 1)), value).otherwise(F.shiftleft(shift, bits) + top)


def stage_values(keyed: Any, bits: int) -> Any:
    """One row per message and measured stage: its ``spark.keys.KEYS``, stage (index in
    ``STAGES``), value (µs) and bucket (``bucket`` with ``bits``)."""
    from pyspark.sql import functions as F

    pairs = ", ".join(f"{index}, `{stage_column(stage)}`" for index, stage in enumerate(STAGES))
    rows = keyed.select(*KEYS, F.expr(f"stack({len(STAGES)}, {pairs}) AS (stage, value)"))
    return rows.where(F.col("value").isNotNull()).withColumn("bucket",
                                                             bucket(F.col("value"), bits))


def _histogram(values: Any) -> Any:
    from pyspark.sql import functions as F

    return values.groupBy(*CELL).agg(F.count(F.lit(1)).alias("n"),
                                     F.min("value").alias("low"), F.max("value").alias("high"))


def _rolled_up(cells: Any, keys: tuple[str, ...]) -> Any:
    """The histogram of one SLA grain (``keys``, stage, bucket, n, low, high): the hourly one
    as it is, the others rolled up from it (an Arrow group-by on the driver)."""
    columns = [*keys, "stage", "bucket"]
    if set(keys) == {"app", "topic", "hour"}:
        return cells.select([*columns, "n", "low", "high"])
    grouped = cells.group_by(columns).aggregate([("n", "sum"), ("low", "min"), ("high", "max")])
    named = {"n_sum": "n", "low_min": "low", "high_max": "high"}  # pyarrow names them so
    return grouped.rename_columns([named.get(c, c) for c in grouped.column_names]).select(
        [*columns, "n", "low", "high"])


def _starts(table: Any, columns: list[str]) -> Any:
    """True at the first row of each run of equal ``columns`` (``table`` sorted by them); two
    nulls are equal."""
    import pyarrow as pa
    import pyarrow.compute as pc

    count = table.num_rows
    change = pa.array([False] * (count - 1), pa.bool_())
    for name in columns:
        column = table[name].combine_chunks()
        current, previous = column.slice(1), column.slice(0, count - 1)
        differs = pc.not_equal(current, previous)
        one_null = pc.not_equal(pc.is_null(current), pc.is_null(previous))
        change = pc.or_(change, pc.if_else(pc.is_null(differs), one_null, differs))
    return pa.concat_arrays([pa.array([True]), change])


def _ranked(cells: Any, grain: str) -> list[dict[str, Any]]:
    """The buckets of one grain's histogram that hold a percentile: group keys, stage, bucket,
    its count, least and greatest value, the group's count (``total``) and, per level, the rank
    within the bucket of the level's value (``k_<level>``; null when the level's value is in
    another bucket). A running count over each group's buckets in order, with Arrow compute."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keys = SLA_GRAINS[grain]
    group = [*keys, "stage"]
    table = _rolled_up(cells, keys).sort_by([(c, "ascending") for c in (*group, "bucket")])
    if not table.num_rows:
        return []
    nothing = pa.scalar(None, pa.int64())
    n = pc.cast(table["n"].combine_chunks(), pa.int64())
    starts = _starts(table, group)
    running = pc.cumulative_sum(n)
    through = pc.subtract(running, pc.fill_null_forward(
        pc.if_else(starts, pc.subtract(running, n), nothing)))
    before = pc.subtract(through, n)
    ends = pa.concat_arrays([starts.slice(1), pa.array([True])])
    total = pc.fill_null_backward(pc.if_else(ends, through, nothing))
    ranks = {}
    for name, level in LEVELS.items():
        rank = pc.divide(pc.add(pc.multiply(total, level.numerator), level.denominator - 1),
                         level.denominator)  # integer division: ceil(total * level)
        inside = pc.and_(pc.less(before, rank), pc.less_equal(rank, through))
        ranks[f"k_{name}"] = pc.if_else(inside, pc.subtract(rank, before), nothing)
    holds = None
    for k in ranks.values():
        holds = pc.is_valid(k) if holds is None else pc.or_(holds, pc.is_valid(k))
    for name, column in (("total", total), *ranks.items()):
        table = table.append_column(name, column)
    return [{"grain": grain, **row} for row in table.filter(holds).to_pylist()]


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

    def found(self, cell: tuple[str, Keys, int, int], k: int, value: int) -> None:
        """The k-th value of a wanted bucket (``cell``: a key of ``wanted``)."""
        grain, key_columns, stage, _ = cell
        values = dict(zip(KEY_COLUMNS, key_columns, strict=True))
        group = (grain, tuple(values[key] for key in SLA_GRAINS[grain]), stage)
        for level in self.wanted[cell][k]:
            self.answers[(group, level)] = value

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


def _members(selection: Selection, cells: Any) -> tuple[Any, dict[Any, list[int]]]:
    """The histogram cells each wanted bucket is made of (``cell``: a row number of
    ``cells``), and those cells with their keys."""
    import pyarrow as pa
    import pyarrow.compute as pc

    buckets = sorted({(stage << 32) + b for _, _, stage, b in selection.wanted})
    packed = pc.add(pc.multiply(pc.cast(cells["stage"], pa.int64()), 1 << 32), cells["bucket"])
    inside = pc.is_in(packed, value_set=pa.array(buckets, pa.int64()))
    rows = cells.filter(inside).append_column(
        "cell", pc.cast(pc.indices_nonzero(inside), pa.int64()))
    members: dict[Any, list[int]] = defaultdict(list)
    for row in rows.select([*KEY_COLUMNS, "stage", "bucket", "cell"]).to_pylist():
        for grain, keys in SLA_GRAINS.items():
            wanted = (grain, tuple(row[k] if k in keys else None for k in KEY_COLUMNS),
                      row["stage"], row["bucket"])
            if wanted in selection.wanted:
                members[wanted].append(row["cell"])
    return rows, members


def _picked(values: Any, rows: Any, members: dict[Any, list[int]]) -> Any:
    """(cell, value) of every value in a cell of a wanted bucket, sorted by cell and value:
    one Spark job (a hash-set test on stage and bucket, then a broadcast join on the cell's
    keys)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql import functions as F

    needed = pa.array(sorted({cell for cells in members.values() for cell in cells}), pa.int64())
    wanted = rows.filter(pc.is_in(rows["cell"], value_set=needed)).select([*CELL, "cell"])
    frame = values.sparkSession.createDataFrame(wanted)
    buckets = {(stage, bucket_) for _, _, stage, bucket_ in members}
    picked = _in_buckets(values, buckets).join(F.broadcast(frame), list(CELL))
    return picked.select("cell", "value").toArrow().sort_by(
        [("cell", "ascending"), ("value", "ascending")])


def _spans(cells: Any) -> dict[int, tuple[int, int]]:
    """Offset and length of each cell's run in a column sorted by cell."""
    import pyarrow.compute as pc

    counted = pc.value_counts(cells)
    spans, start = {}, 0
    for cell, count in sorted(zip(counted.field("values").to_pylist(),
                                  counted.field("counts").to_pylist(), strict=True)):
        spans[cell] = (start, count)
        start += count
    return spans


def _pick(selection: Selection, cells: Any, values: Any) -> None:
    """Answers the wanted buckets: each one's values (its cells' sorted runs, merged when it
    spans several cells) in ascending order, the k-th is the answer."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows, members = _members(selection, cells)
    picked = _picked(values, rows, members)
    spans = _spans(picked["cell"])
    ordered = picked["value"].combine_chunks()
    for cell, ranks in selection.wanted.items():
        parts = [ordered.slice(*spans[part]) for part in members[cell]]
        bucket_values = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
        if len(parts) > 1:
            bucket_values = bucket_values.take(pc.array_sort_indices(bucket_values))
        for k in ranks:
            selection.found(cell, k, bucket_values[k - 1].as_py())


def keyed_values(facts: Any, pairs: Pairs, bits: int | None = None) -> Any:
    """``stage_values`` of the keyed facts, with ``bits_for`` the pairs' messages and groups
    unless ``bits`` is given."""
    bits = bits_for(pairs.messages, pairs.groups) if bits is None else bits
    return stage_values(pairs.keyed(facts), bits)


def histogram(values: Any, pairs: Pairs) -> Any:
    """The histogram of ``stage_values`` (one Spark job) as an Arrow table with app, topic
    and hour restored."""
    return pairs.restored(_histogram(values).toArrow())


def select(cells: Any, values: Any) -> Selection:
    """The percentiles from the histogram ``cells`` (an Arrow table of ``_histogram``): ranks
    on the driver, then the values of the wanted buckets from ``values``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cells = cells.append_column("day", pc.cast(cells["hour"], pa.date32()))
    selection = Selection()
    for grain in SLA_GRAINS:
        for row in _ranked(cells, grain):
            selection.add(row)
    selection.resolve()
    if selection.wanted:
        _pick(selection, cells, values)
    return selection
