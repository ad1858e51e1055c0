"""One report run: load the history, derive per-message facts, aggregate them at every grain
(``spark.grains``), list what is stuck, write the outputs. ``run_report`` takes the
SparkSession so tests share one.

The history is read once: the facts (one scan of messages and events, one aggregation of the
events per message, one join) are persisted (memory, spilling to disk) and every aggregation
reads them: the window's app and topic pairs (``spark.keys``: integer keys for the
aggregations; the topics for the SLA targets), the counters at every grain (rolled up on the
driver), and the stage percentiles (``spark.percentiles``: a histogram pass, then a pass over
the values the exact ranks need). Percentiles are not additive, so no grain is derived from a
finer grain's percentiles. The stuck list reads the open messages (``spark.inputs``).

Incremental runs: each run covers its ``--since/--until`` window and rewrites its ``--out``
directory; run hourly with ``--since`` = the previous hour (or a longer trailing window, to
pick up late outcomes of messages that were in flight) and one ``--out`` per window or a
rolling one. The cost of a run follows the window, not the table (JDBC slices use the
``messages_created`` index; Parquet inputs are filtered on read).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from history.options import Window
from spark.consumers import consumer_table
from spark.facts import message_facts, with_sla
from spark.grains import GRAINS
from spark.htmlreport import render
from spark.inputs import ArchiveSource, History, JdbcSource, ParquetSource, load_history
from spark.keys import Pairs, with_keys
from spark.metrics import aggregate_grains
from spark.stuck import DEFAULT_GRACE_SECONDS, stuck_messages
from spark.summary import ReportContext, ReportTables, write_outputs
from spark.targets import SlaTargets


@dataclass(frozen=True)
class ReportConfig:
    out: Path
    source: JdbcSource | ParquetSource | ArchiveSource
    window: Window = field(default_factory=Window)
    as_of: datetime | None = None  # "now" for what is stuck and SLA pending; default: source
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    targets: SlaTargets = field(default_factory=SlaTargets)
    list_limit: int = 100


def _collect(config: ReportConfig, now: datetime, history: History) -> ReportTables:
    """The grains from the persisted facts; the stuck list (its own small input), then the
    per-consumer table (``spark.consumers``: the acks and first publishes), from a second
    driver thread meanwhile, so their jobs fill cores the facts leave idle while the driver
    plans and ranks."""
    from pyspark import StorageLevel

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="stuck") as pool:
        stuck = pool.submit(stuck_messages, history.open, now, config.grace_seconds)
        facts = with_keys(message_facts(history.messages, history.events, now)).persist(
            StorageLevel.MEMORY_AND_DISK)
        try:
            pairs = Pairs.of(facts)
            targets = {topic: config.targets.target_for(topic)
                       for topic in set(pairs.topics) if topic is not None}
            consumers = pool.submit(consumer_table, history.messages, history.events, targets,
                                    history.open, now, config.grace_seconds,
                                    config.targets.target_for)
            grains = aggregate_grains(with_sla(facts, targets), GRAINS, pairs)
        finally:
            facts.unpersist()
        return ReportTables(**grains, stuck=stuck.result(), consumers=consumers.result())


def run_report(spark: Any, config: ReportConfig) -> dict[str, Any]:
    """Runs the report and returns the summary (as written to ``summary.json``)."""
    history = load_history(spark, config.source, config.window)
    now = config.as_of or history.clock or datetime.now(UTC)
    tables = _collect(config, now, history)
    context = ReportContext(
        as_of=now,
        source=config.source.name,
        window=config.window,
        grace_seconds=config.grace_seconds,
        targets=config.targets,
        list_limit=config.list_limit,
    )
    return write_outputs(config.out, tables, context, render)
