"""Integer keys of the report's aggregations: the (app, topic) pair as a 64-bit hash of both
(``pair``), the hour as whole hours since the epoch (``hour_number``).

Spark groups and shuffles these fixed-width numbers instead of two strings and a timestamp:
its aggregations keep a faster hash map for fixed-width keys, and the shuffled rows are
smaller. ``with_keys`` adds both columns to the facts before they are persisted, so no
aggregation joins anything to get them. The driver learns which pair each hash stands for
from the first job over the facts (``Pairs.of``: messages per pair and hour) and turns the
numbers back into app, topic and hour (``Pairs.restored``). Two pairs with one hash would
merge their groups: ``Pairs.of`` sees it (one hash, two pairs) and the pairs are then
numbered by a broadcast join on (app, topic) instead (``Pairs.keyed``), so a collision costs
time, never a wrong figure. A null app or topic is a pair of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

HOUR_MICROS = 3_600_000_000
KEYS = ("pair", "hour_number")  # what the aggregations group by instead of app, topic, hour


def with_keys(facts: Any) -> Any:
    """``facts`` (with ``app``, ``topic`` and ``hour``) with the ``pair`` hash and
    ``hour_number`` columns."""
    from pyspark.sql import functions as F

    app, topic = F.col("app"), F.col("topic")
    pair = F.xxhash64(app, app.isNull(), topic, topic.isNull())  # null-aware: (a, null) != (null, a)
    hour_number = F.call_function("div", F.unix_micros("hour"), F.lit(HOUR_MICROS))
    return facts.withColumn("pair", pair).withColumn("hour_number", hour_number)


def _keyed(facts: Any) -> Any:
    return facts if "pair" in facts.columns else with_keys(facts)


@dataclass(frozen=True)
class Pairs:
    """The (app, topic) pairs of the facts with their ``pair`` hashes (None after a collision:
    a pair's number is then its index), and the number of messages and of app, topic and hour
    groups they make."""

    apps: tuple[str | None, ...]
    topics: tuple[str | None, ...]
    hashes: tuple[int, ...] | None = None
    messages: int = 0
    groups: int = 0

    @classmethod
    def of(cls, facts: Any) -> Pairs:
        """The distinct pairs of ``facts`` (one Spark job: messages per pair and hour), in a
        stable order."""
        rows = _keyed(facts).groupBy("pair", "app", "topic", "hour_number").count().collect()
        found = sorted(
            {(row["app"], row["topic"], row["pair"]) for row in rows},
            key=lambda pair: tuple((value is not None, value or "") for value in pair[:2]))
        hashes = tuple(pair for _, _, pair in found)
        return cls(tuple(app for app, _, _ in found), tuple(topic for _, topic, _ in found),
                   hashes if len(set(hashes)) == len(hashes) else None,
                   messages=sum(row["count"] for row in rows), groups=len(rows))

    def keyed(self, facts: Any) -> Any:
        """``facts`` with the ``pair`` and ``hour_number`` columns (``with_keys``; after a
        collision, ``pair`` is the pair's index, from a broadcast join)."""
        keyed = _keyed(facts)
        if self.hashes is not None:
            return keyed
        import pyarrow as pa
        from pyspark.sql import functions as F

        frame = facts.sparkSession.createDataFrame(pa.table({  # from Arrow: no Python workers
            "p_app": pa.array(self.apps, pa.string()),
            "p_topic": pa.array(self.topics, pa.string()),
            "p_pair": pa.array(range(len(self.apps)), pa.int64())}))
        on = (F.col("app").eqNullSafe(F.col("p_app"))
              & F.col("topic").eqNullSafe(F.col("p_topic")))
        return keyed.join(F.broadcast(frame), on).withColumn("pair", F.col("p_pair")).drop(
            "p_app", "p_topic", "p_pair")

    def restored(self, table: Any) -> Any:
        """An Arrow ``table`` keyed by ``KEYS`` with ``app``, ``topic`` and ``hour`` in front
        (the keys stay, after them)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        pair = table["pair"]
        if self.hashes is not None:
            pair = pc.index_in(pair, value_set=pa.array(self.hashes, pa.int64()))
        hour = pc.multiply(pc.cast(table["hour_number"], pa.int64()), HOUR_MICROS)
        front = {
            "app": pc.take(pa.array(self.apps, pa.string()), pair),
            "topic": pc.take(pa.array(self.topics, pa.string()), pair),
            "hour": pc.cast(hour, pa.timestamp("us", tz="UTC")),
        }
        return pa.table({**front, **{name: table[name] for name in table.column_names}})
