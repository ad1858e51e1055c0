"""Integer keys of the report's aggregations: the window's (app, topic) pairs numbered on the
driver (``pair``), the hour as whole hours since the epoch (``hour_number``).

Spark groups and shuffles these fixed-width numbers instead of two strings and a timestamp:
its aggregations keep a faster hash map for fixed-width keys, and the shuffled rows are
smaller. The numbers are attached by a broadcast join on (app, topic) (null-safe: a null app
or topic is a pair of its own) and never leave the aggregations: the driver turns them back
into app, topic and hour (``Pairs.restored``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

HOUR_MICROS = 3_600_000_000
KEYS = ("pair", "hour_number")  # what the aggregations group by instead of app, topic, hour


@dataclass(frozen=True)
class Pairs:
    """The (app, topic) pairs of the facts (a pair's number is its index), with the number of
    messages and of app, topic and hour groups they make."""

    apps: tuple[str | None, ...]
    topics: tuple[str | None, ...]
    messages: int = 0
    groups: int = 0

    @classmethod
    def of(cls, facts: Any) -> Pairs:
        """The distinct pairs of ``facts`` (one Spark job: messages per app, topic and hour), in
        a stable order."""
        rows = facts.groupBy("app", "topic", "hour").count().collect()
        pairs = sorted(
            {(row["app"], row["topic"]) for row in rows},
            key=lambda pair: tuple((value is not None, value or "") for value in pair))
        return cls(tuple(app for app, _ in pairs), tuple(topic for _, topic in pairs),
                   messages=sum(row["count"] for row in rows), groups=len(rows))

    def keyed(self, facts: Any) -> Any:
        """``facts`` with the ``pair`` and ``hour_number`` columns."""
        import pyarrow as pa
        from pyspark.sql import functions as F

        frame = facts.sparkSession.createDataFrame(pa.table({  # from Arrow: no Python workers
            "p_app": pa.array(self.apps, pa.string()),
            "p_topic": pa.array(self.topics, pa.string()),
            "pair": pa.array(range(len(self.apps)), pa.int32())}))
        on = (F.col("app").eqNullSafe(F.col("p_app"))
              & F.col("topic").eqNullSafe(F.col("p_topic")))
        hour_number = F.call_function("div", F.unix_micros("hour"), F.lit(HOUR_MICROS))
        return facts.join(F.broadcast(frame), on).drop("p_app", "p_topic").withColumn(
            "hour_number", hour_number)

    def restored(self, table: Any) -> Any:
        """An Arrow ``table`` keyed by ``KEYS`` with ``app``, ``topic`` and ``hour`` in front
        (the keys stay, after them)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        pair = table["pair"]
        hour = pc.multiply(pc.cast(table["hour_number"], pa.int64()), HOUR_MICROS)
        front = {
            "app": pc.take(pa.array(self.apps, pa.string()), pair),
            "topic": pc.take(pa.array(self.topics, pa.string()), pair),
            "hour": pc.cast(hour, pa.timestamp("us", tz="UTC")),
        }
        return pa.table({**front, **{name: table[name] for name in table.column_names}})
