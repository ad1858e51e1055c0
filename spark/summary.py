"""The report's outputs in ``--out``: Parquet tables (``hourly``, ``daily``, ``topics``,
``stuck``), ``summary.json`` (schema in ``spark/README.md``) and ``report.html``.

The tables are small (aggregates), so Spark hands them to the driver as Arrow and the driver
writes them: ``--out`` is a local (or mounted) directory of the driver, whatever the master.
Each file is written beside its final name and renamed into place, so a reader (the
dashboard) never sees a half-written file.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from functools import partial
from pathlib import Path
from typing import Any

from history.options import Window
from spark.facts import STAGES
from spark.grains import DISTRIBUTION_POPULATIONS
from spark.metrics import METRIC_COLUMNS, PERCENTILES, RATIOS
from spark.targets import SlaTargets

SCHEMA_VERSION = 1
TABLE_FILES = {
    "hourly": "hourly.parquet",
    "daily": "daily.parquet",
    "topics": "topics.parquet",
    "stuck": "stuck.parquet",
    "consumers": "consumers.parquet",
}
STAGE_METRICS = frozenset(f"{s}_{p}" for s in STAGES for p in ("count", *PERCENTILES))


@dataclass(frozen=True)
class ReportContext:
    as_of: datetime
    source: str
    window: Window = field(default_factory=Window)
    grace_seconds: float = 60.0
    targets: SlaTargets = field(default_factory=SlaTargets)
    list_limit: int = 100
    generated_at: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass(frozen=True)
class ReportTables:
    """Arrow tables collected from Spark, one per grain plus the stuck list and histograms."""

    hourly: Any
    daily: Any
    topics: Any
    hours: Any
    days: Any
    totals: Any
    stuck: Any
    checkbacks_per_message: Any  # rows (value, messages)
    deliveries_per_message: Any
    consumers: Any  # per app, topic and consumer (spark.consumers)


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _plain(value: Any) -> Any:
    """A JSON-ready value: times as ISO 8601 UTC, NaN as null."""
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def metrics_json(row: dict[str, Any]) -> dict[str, Any]:
    """A grain row: keys and counters flat, stage latencies nested under ``stages``."""
    flat = {k: _plain(v) for k, v in row.items() if k not in STAGE_METRICS}
    flat["stages"] = {
        stage: {part: _plain(row[f"{stage}_{part}"]) for part in ("count", *PERCENTILES)}
        for stage in STAGES
    }
    return flat


def _rows(table: Any) -> list[dict[str, Any]]:
    return list(table.to_pylist())


def _listing(rows: list[dict[str, Any]], limit: int, key: str) -> dict[str, Any]:
    groups: dict[str, int] = {}
    for row in rows:
        groups[row[key]] = groups.get(row[key], 0) + 1
    return {
        "total": len(rows),
        f"by_{key}": dict(sorted(groups.items())),
        "limit": limit,
        "items": [{k: _plain(v) for k, v in row.items()} for row in rows[:limit]],
    }


def _histogram(table: Any) -> list[dict[str, Any]]:
    return [{"value": row["value"], "messages": row["messages"]} for row in _rows(table)]


def build_summary(tables: ReportTables, context: ReportContext) -> dict[str, Any]:
    stuck = [row for row in _rows(tables.stuck) if row["kind"] != "dead"]
    dead = [row for row in _rows(tables.stuck) if row["kind"] == "dead"]
    totals = _rows(tables.totals)
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_at": iso(context.generated_at),
        "as_of": iso(context.as_of),
        "source": context.source,
        "window": {"since": iso(context.window.since), "until": iso(context.window.until)},
        "grace_seconds": context.grace_seconds,
        "percentiles": {"method": "nearest-rank", "exact": True, "accuracy": None,
                        "levels": dict(PERCENTILES)},
        "sla_targets": context.targets.as_json(),
        "stages": list(STAGES),
        "metrics": list(METRIC_COLUMNS),
        "ratios": {name: {"numerator": numerator, "denominator": " + ".join(denominator)}
                   for name, (numerator, denominator) in RATIOS.items()},
        "distribution_populations": dict(DISTRIBUTION_POPULATIONS),
        "totals": metrics_json(totals[0]) if totals else None,
        "hours": [metrics_json(row) for row in _rows(tables.hours)],
        "days": [metrics_json(row) for row in _rows(tables.days)],
        "topics": [metrics_json(row) for row in _rows(tables.topics)],
        "distributions": {
            "checkbacks_per_message": _histogram(tables.checkbacks_per_message),
            "deliveries_per_message": _histogram(tables.deliveries_per_message),
        },
        "consumers": [{k: _plain(v) for k, v in row.items()} for row in _rows(tables.consumers)],
        "stuck": _listing(stuck, context.list_limit, "kind"),
        "dead": _listing(dead, context.list_limit, "dead_reason"),
        "tables": dict(TABLE_FILES),
    }


def _replace(path: Path, write: Callable[[Path], object]) -> None:
    partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        write(partial)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def _write_text(path: Path, text: str) -> None:
    _replace(path, lambda target: target.write_text(text, encoding="utf-8"))


def write_outputs(out: Path, tables: ReportTables, context: ReportContext,
                  render_html: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    for name, filename in TABLE_FILES.items():
        _replace(out / filename, partial(pq.write_table, getattr(tables, name)))
    summary = build_summary(tables, context)
    _write_text(out / "summary.json", json.dumps(summary, indent=1, allow_nan=False) + "\n")
    _write_text(out / "report.html", render_html(summary))
    return summary

