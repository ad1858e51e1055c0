"""One report run: load the history, derive per-message facts, aggregate them at every grain,
list what is stuck, write the outputs. ``run_report`` takes the SparkSession so tests share one.

Grains (``GRAINS``): ``hourly`` (app, topic, hour), ``daily`` (app, topic, day), ``topics``
(app, topic over the window), ``hours`` and ``days`` (all apps and topics), ``totals``.
Percentiles are not additive, so every grain is aggregated from the facts, never from a finer
grain. All grains come from one pass over the facts (grouping sets), so the history is read
once, and the facts are coalesced to as many partitions as the input or the cores, whichever
is more: each partition holds a percentile summary per group it sees, so Spark's 200 default
shuffle partitions would cost far more than they parallelise. Besides the SLA tables the pass
groups by the number of check-backs and of deliveries per message (``DISTRIBUTIONS``).

Incremental runs: each run covers its ``--since/--until`` window and rewrites its ``--out``
directory; run hourly with ``--since`` = the previous hour (or a longer trailing window, to
pick up late outcomes of messages that were in flight) and one ``--out`` per window or a
rolling one. The cost of a run follows the window, not the table (JDBC slices use the
``messages_created`` index; Parquet inputs are filtered on read).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from spark.facts import message_facts, with_sla
from spark.htmlreport import render
from spark.inputs import JdbcSource, ParquetSource, load_history
from spark.metrics import DISTRIBUTIONS, EXACT_ACCURACY, aggregate_grains
from spark.options import Window
from spark.stuck import DEFAULT_GRACE_SECONDS, stuck_messages
from spark.summary import ReportContext, ReportTables, write_outputs
from spark.targets import SlaTargets

GRAINS: dict[str, tuple[str, ...]] = {
    "hourly": ("app", "topic", "hour"),
    "daily": ("app", "topic", "day"),
    "topics": ("app", "topic"),
    "hours": ("hour",),
    "days": ("day",),
    "totals": (),
    **DISTRIBUTIONS,
}


@dataclass(frozen=True)
class ReportConfig:
    out: Path
    source: JdbcSource | ParquetSource
    window: Window = field(default_factory=Window)
    as_of: datetime | None = None  # "now" for what is stuck and SLA pending; default: source
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    targets: SlaTargets = field(default_factory=SlaTargets)
    percentile_accuracy: int = EXACT_ACCURACY
    list_limit: int = 100


def _collect(spark: Any, config: ReportConfig, now: datetime, history: Any) -> ReportTables:
    topics = [row["topic"] for row in history.topics.collect()]
    partitions = max(spark.sparkContext.defaultParallelism,
                     history.messages.rdd.getNumPartitions())
    facts = message_facts(history.messages, history.events, now).coalesce(partitions)
    scored = with_sla(facts, {topic: config.targets.target_for(topic) for topic in topics})
    grains = aggregate_grains(scored, GRAINS, config.percentile_accuracy)
    return ReportTables(
        **grains, stuck=stuck_messages(history.open, now, config.grace_seconds).toArrow())


def run_report(spark: Any, config: ReportConfig) -> dict[str, Any]:
    """Runs the report and returns the summary (as written to ``summary.json``)."""
    history = load_history(spark, config.source, config.window)
    now = config.as_of or history.clock or datetime.now(UTC)
    tables = _collect(spark, config, now, history)
    context = ReportContext(
        as_of=now,
        source=config.source.name,
        window=config.window,
        grace_seconds=config.grace_seconds,
        targets=config.targets,
        percentile_accuracy=config.percentile_accuracy,
        list_limit=config.list_limit,
    )
    return write_outputs(config.out, tables, context, render)
