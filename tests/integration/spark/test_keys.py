"""The integer keys of the report's aggregations (``spark/keys.py``): every (app, topic) pair
gets a number, null app or topic included, and the driver turns the numbers and hour numbers
back into the same app, topic and hour."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest

from spark.keys import Pairs

pytestmark = pytest.mark.spark

ROWS = [
    ("shop", "orders", datetime(2026, 5, 1, 9, tzinfo=UTC)),
    ("shop", "orders", datetime(2026, 5, 2, 23, tzinfo=UTC)),
    (None, "orders", datetime(2026, 5, 1, 9, tzinfo=UTC)),
    ("shop", None, datetime(2026, 5, 1, 10, tzinfo=UTC)),
    ("billing", "credits", datetime(1969, 12, 31, 23, tzinfo=UTC)),  # a negative hour number
]


def _facts(spark: Any) -> Any:
    return spark.createDataFrame(pa.table({
        "app": pa.array([r[0] for r in ROWS], pa.string()),
        "topic": pa.array([r[1] for r in ROWS], pa.string()),
        "hour": pa.array([r[2] for r in ROWS], pa.timestamp("us", tz="UTC")),
    }))


def test_pairs_are_numbered_null_safe_and_restored(spark_session: Any) -> None:
    facts = _facts(spark_session)
    pairs = Pairs.of(facts)
    assert list(zip(pairs.apps, pairs.topics, strict=True)) == [
        (None, "orders"), ("billing", "credits"), ("shop", None), ("shop", "orders")]
    keyed = pairs.keyed(facts).toArrow()
    assert keyed.num_rows == len(ROWS)  # a null app or topic is a pair, not a lost row
    restored = pairs.restored(keyed.select(["pair", "hour_number"]))
    assert restored.column_names[:3] == ["app", "topic", "hour"]
    columns = [restored[c].to_pylist() for c in ("app", "topic", "hour")]
    assert sorted(zip(*columns, strict=True), key=repr) == sorted(ROWS, key=repr)
    assert restored.schema.field("hour").type == pa.timestamp("us", tz="UTC")


def test_an_empty_window_has_no_pairs(spark_session: Any) -> None:
    facts = _facts(spark_session).limit(0)
    pairs = Pairs.of(facts)
    assert pairs.apps == pairs.topics == ()
    keyed = pairs.keyed(facts).toArrow()
    assert keyed.num_rows == 0
    assert pairs.restored(keyed.select(["pair", "hour_number"])).num_rows == 0


def test_pairs_sharing_a_hash_are_numbered_instead(spark_session: Any) -> None:
    """Two pairs with one hash would merge their groups: the pairs are numbered by a join."""
    from pyspark.sql import functions as F

    from spark.keys import with_keys

    facts = with_keys(_facts(spark_session)).withColumn("pair", F.lit(7).cast("long"))
    pairs = Pairs.of(facts)
    assert pairs.hashes is None
    assert (pairs.messages, pairs.groups) == (len(ROWS), len(ROWS))
    keyed = pairs.keyed(facts).toArrow()
    assert sorted(set(keyed["pair"].to_pylist())) == [0, 1, 2, 3]
    restored = pairs.restored(keyed.select(["pair", "hour_number"]))
    columns = [restored[c].to_pylist() for c in ("app", "topic", "hour")]
    assert sorted(zip(*columns, strict=True), key=repr) == sorted(ROWS, key=repr)


def test_hashes_tell_a_null_app_from_a_null_topic(spark_session: Any) -> None:
    frame = spark_session.createDataFrame(pa.table({
        "app": pa.array(["a", None], pa.string()), "topic": pa.array([None, "a"], pa.string()),
        "hour": pa.array([datetime(2026, 5, 1, 9, tzinfo=UTC)] * 2, pa.timestamp("us", tz="UTC")),
    }))
    pairs = Pairs.of(frame)
    assert pairs.hashes is not None and len(set(pairs.hashes)) == 2
