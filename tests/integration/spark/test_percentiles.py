"""The report's percentiles are exact nearest-rank values (``spark/metrics.py``): checked
against a plain sort on a few thousand random latencies (the facts come out of a shuffle, so
partial summaries of several partitions are merged), with ties, in groups of different sizes."""

from __future__ import annotations

import math
import random
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from spark.inputs import ParquetSource
from spark.report import ReportConfig, run_report
from tests.integration.spark.history import Ev, History, Msg, ts, write_export

pytestmark = pytest.mark.spark

LEVELS = {"p50": 0.5, "p95": 0.95, "p99": 0.99}


def nearest_rank(values: list[float], level: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(level * len(ordered))) - 1]


def _history(rng: random.Random) -> tuple[History, dict[str, list[float]]]:
    """Messages in three topics (sizes 1, 7 and 3000), one hour; prepare->done latencies
    drawn at microsecond precision, with repeated values."""
    messages: list[Msg] = []
    events: list[Ev] = []
    latencies: dict[str, list[float]] = {}
    start = ts("2026-04-01T08:00:00")
    for topic, size in (("one", 1), ("seven", 7), ("many", 3000)):
        latencies[topic] = []
        for i in range(size):
            created = start + timedelta(microseconds=rng.randrange(3_000_000_000))
            micros = rng.choice([250_000, rng.randrange(1, 120_000_000)])
            done = created + timedelta(microseconds=micros)
            mid = f"{topic}-{i}"
            messages.append(Msg(mid, "app", topic, "done", created, confirmed_at=created,
                                done_at=done))
            events += [Ev(mid, created, "sent"), Ev(mid, done, "acked", {"via": "http"})]
            latencies[topic].append(micros / 1_000_000)
    return History(messages, events), latencies


def test_prepare_to_done_percentiles_equal_a_sort(spark_session: Any, tmp_path: Path) -> None:
    history, latencies = _history(random.Random(2026))
    source = write_export(tmp_path / "export", history)
    summary = run_report(spark_session, ReportConfig(
        out=tmp_path / "out", source=ParquetSource(source), as_of=ts("2026-04-02T00:00:00")))
    topics = {t["topic"]: t["stages"]["prepare_to_done"] for t in summary["topics"]}
    everything = [v for values in latencies.values() for v in values]
    expected = {topic: {"count": len(values),
                        **{name: nearest_rank(values, level) for name, level in LEVELS.items()}}
                for topic, values in latencies.items()}
    assert topics == expected
    assert summary["totals"]["stages"]["prepare_to_done"] == {
        "count": len(everything),
        **{name: nearest_rank(everything, level) for name, level in LEVELS.items()}}
