"""A realistic ``summary.json`` built by the report's own ``spark.summary.build_summary`` from
hand-made aggregate rows (no Spark run), so it follows the report's schema exactly."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from spark.facts import STAGES
from spark.metrics import METRIC_COLUMNS, PERCENTILES
from spark.summary import ReportContext, ReportTables, build_summary

AS_OF = datetime(2026, 3, 2, 14, 0, tzinfo=UTC)
TOPICS = (("shop", "orders.paid", 0.9), ("billing", "invoices", 1.0))
# spark.consumers.CONSUMER_COLUMNS: two consumers of shop / orders.paid
CONSUMERS = [
    {"app": "shop", "topic": "orders.paid", "consumer": consumer, "sla_target_seconds": 60.0,
     "acked": acked, "sla_met": met, "sla_missed": acked - met, "sla_compliance": met / acked,
     "stuck": stuck, "dead": dead, "publish_to_ack_count": acked, "publish_to_ack_p50": p50,
     "publish_to_ack_p95": p50 * 8, "publish_to_ack_p99": p50 * 20}
    for consumer, acked, met, stuck, dead, p50 in (("invoicing", 30, 30, 0, 0, 0.12),
                                                   ("points", 28, 25, 2, 1, 0.4))]


@dataclass(frozen=True)
class Rows:
    """Stands in for an Arrow table: ``build_summary`` only calls ``to_pylist``."""

    rows: list[dict[str, Any]]

    def to_pylist(self) -> list[dict[str, Any]]:
        return self.rows


def metrics(scale: float, compliance: float | None) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(METRIC_COLUMNS, 0)
    row |= {"messages": round(20 * scale), "prepared": round(12 * scale),
            "one_shot": round(8 * scale), "sent": round(17 * scale),
            "confirmed_by_producer": round(8 * scale), "confirmed_by_check_back": 2,
            "cancelled": 1, "cancelled_by_producer": 1, "done": round(15 * scale),
            "pending_send": 1, "unacked": 1, "dead": 1, "dead_delivery_exhausted": 1,
            "sla_met": round(15 * scale), "sla_missed": 1, "sla_compliance": compliance,
            "checkbacks_per_message": 0.25, "deliveries_per_message": 1.1}
    for index, stage in enumerate(STAGES):
        row[f"{stage}_count"] = round(15 * scale)
        for level, fraction in PERCENTILES.items():
            row[f"{stage}_{level}"] = round((index + 1) * scale * (1 + 20 * fraction ** 4), 3)
    return row


def summary() -> dict[str, Any]:
    hours = [{"hour": datetime(2026, 3, 2, h, tzinfo=UTC)} | metrics(1 + (h % 3) / 2, 0.95)
             for h in range(8, 14)]
    topics = [{"app": app, "topic": topic, "sla_target_seconds": 60.0} | metrics(1, compliance)
              for app, topic, compliance in TOPICS]
    tables = ReportTables(
        hourly=Rows([]), daily=Rows([]), topics=Rows(topics), hours=Rows(hours),
        days=Rows([{"day": AS_OF.date()} | metrics(6, 0.95)]), totals=Rows([metrics(6, 0.95)]),
        stuck=Rows([]),
        checkbacks_per_message=Rows([{"value": 0, "messages": 90}]),
        deliveries_per_message=Rows([{"value": 1, "messages": 100}]), consumers=Rows(CONSUMERS),
    )
    context = ReportContext(as_of=AS_OF, source="jdbc", generated_at=AS_OF)
    return build_summary(tables, context)


def write_summary(report_dir: Path) -> dict[str, Any]:
    """Writes ``report_dir/summary.json`` as ``rms report`` does; returns its content."""
    content = summary()
    report_dir.mkdir(parents=True, exist_ok=True)
    (report_dir / "summary.json").write_text(json.dumps(content, indent=1, allow_nan=False),
                                             encoding="utf-8")
    return content
