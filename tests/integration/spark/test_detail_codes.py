"""Reading an event's JSON detail (``spark.facts.detail_code``): the regular-expression path
for flat objects reads the same value as Spark's JSON parser (``get_json_object``) on every
detail, whatever its shape: RMS's own details, odd spacing, duplicated keys, values that are
not strings, escapes, nesting, malformed text."""

from __future__ import annotations

import json
import random
from typing import Any

import pyarrow as pa
import pytest

from spark.facts import ACTORS, CHECK_OUTCOMES, FLAT_OBJECT, detail_code

pytestmark = pytest.mark.spark

HAND = [
    '{"attempt": 1, "outcome": "committed"}', '{"outcome":"rolled_back"}',
    '{ "outcome" :\n "unknown" }', '{\t"outcome"\r:"committed"}',
    '{"outcome": "unknown", "outcome": "committed"}', '{"outcome": 1, "outcome": "committed"}',
    '{"outcome": "committed"', '{"outcome": "committed"}}', '{"outcome": "committed",,}',
    '{"outcome": "committed" "x": 1}', '{"outcome": "committed"} trailing', 'not json', '',
    '{"outcome": 1}', '{"outcome": null}', '{"outcome": true}', '{"outcome": ""}', '{}',
    '{"a": "outcome", "b": 1}', '{"x": {"outcome": "committed"}}',
    '{"e": "\\"outcome\\": \\"committed\\""}', '{"outcome": "commi\\u0074ted"}',
    '{"Outcome": "committed"}', '{"outcome": "committed", "x": [1]}', '["outcome"]',
    '{"outcome": "committed\n"}', '{"outcome": 01}', '{"outcome": -0.5e+3, "by": "admin"}',
    '{"by": "producer"}', '{"by": "check-back", "outcome": "rolled_back"}', '{"by": "robot"}',
    ' {"by": "admin"}', '{"by":"admin" }', '{"xby": "admin"}', '{"by": "admin", "by": "x"}',
    '{"outcome": "committed", "error": "timeout: \\"slow\\""}', 'null', '"committed"',
]
KEYS = ["outcome", "by", "attempt", "error", "x"]
VALUES = [*CHECK_OUTCOMES, *ACTORS, "other", "", "commit\\u0074ed", 'say \\"hi\\"', 1, 0, -2.5,
          True, None, {"outcome": "committed"}, ["by"]]


def _generated(seed: int, count: int) -> list[str]:
    """Random details: RMS-like objects, with odd spacing, and broken by a random cut or an
    inserted character."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        members = {rng.choice(KEYS): rng.choice(VALUES) for _ in range(rng.randint(0, 4))}
        text = json.dumps(members, separators=rng.choice([(",", ":"), (", ", ": "),
                                                          (" ,\n", " :\t")]))
        text = text.replace("\\\\u0074", "\\u0074").replace('\\\\\\"', '\\"')
        damage = rng.random()
        if damage < 0.1:
            text = text[:rng.randint(0, len(text))]
        elif damage < 0.2:
            cut = rng.randint(0, len(text))
            text = text[:cut] + rng.choice('{}[],:" x1') + text[cut:]
        out.append(text)
    return out


@pytest.mark.parametrize(("name", "values"), [("outcome", CHECK_OUTCOMES), ("by", ACTORS)])
def test_the_fast_path_reads_what_the_json_parser_reads(
        spark_session: Any, name: str, values: tuple[str, ...]) -> None:
    from pyspark.sql import functions as F

    details = HAND + _generated(seed=len(name), count=3000)
    frame = spark_session.createDataFrame(pa.table({"detail": pa.array(details, pa.string())}))
    detail = F.col("detail")
    parsed = F.coalesce(F.array_position(F.array(*[F.lit(v) for v in values]),
                                         F.get_json_object(detail, f"$.{name}")), F.lit(0))
    rows = frame.select("detail", detail_code(detail, name, values).alias("fast"),
                        parsed.alias("parsed"), detail.rlike(FLAT_OBJECT).alias("flat")).collect()
    differing = [(r["detail"], r["fast"], r["parsed"]) for r in rows if r["fast"] != r["parsed"]]
    assert differing == []
    flat = sum(r["flat"] for r in rows)
    assert flat > len(rows) / 2  # the fast path is taken for most, not bypassed
    assert {r["parsed"] for r in rows} == set(range(len(values) + 1))  # every code is seen
