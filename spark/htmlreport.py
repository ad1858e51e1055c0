"""``report.html``: one self-contained page drawn from the summary alone (inline CSS and SVG;
no script, no external resource), so it opens offline and from an e-mail attachment."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from spark import svg
from spark.facts import STAGES

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1a202c;max-width:1100px}
h1{font-size:22px}h2{font-size:17px;margin-top:32px;border-bottom:1px solid #e2e8f0}
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 8px;border-bottom:1px solid #edf2f7;
text-align:right}th{background:#f7fafc}td.k,th.k{text-align:left}
.tiles{display:flex;gap:12px;flex-wrap:wrap}.tile{border:1px solid #e2e8f0;border-radius:6px;
padding:8px 14px}.tile b{display:block;font-size:20px}.muted{fill:#718096;color:#718096}
.chart-title{font-weight:600;font-size:13px}.tick{font-size:11px;fill:#4a5568}
.grid{stroke:#edf2f7}svg{display:block;margin:8px 0}
"""

OUTCOMES = (
    ("prepared", "prepared"), ("one_shot", "one-shot sends"),
    ("confirmed_by_producer", "confirmed by producer"),
    ("confirmed_by_check_back", "confirmed by check-back"),
    ("confirmed_by_admin", "confirmed by admin"), ("cancelled_by_producer", "cancelled"),
    ("rolled_back_by_check_back", "rolled back by check-back"),
    ("cancelled_by_admin", "cancelled by admin"), ("done", "done"),
    ("pending_send", "pending-send now"), ("unacked", "unacked now"),
    ("dead_check_exhausted", "dead: check-exhausted"),
    ("dead_delivery_exhausted", "dead: delivery-exhausted"),
    ("delayed", "delayed (deliver_after)"), ("scheduled", "scheduled now"),
)


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return svg.plain_number(value)
    return escape(str(value))


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], keys: int = 1) -> str:
    head = "".join(f'<th class="{"k" if i < keys else ""}">{escape(h)}</th>'
                   for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(f'<td class="{"k" if i < keys else ""}">{_text(v)}</td>'
                         for i, v in enumerate(row)) + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>" if rows else '<p class="muted">none</p>'


def _tiles(summary: dict[str, Any]) -> str:
    totals = summary["totals"] or {}
    compliance = totals.get("sla_compliance")
    tiles = [
        ("messages", totals.get("messages", 0)),
        ("done", totals.get("done", 0)),
        ("SLA compliance", "-" if compliance is None else svg.percent_label(compliance)),
        ("stuck now", summary["stuck"]["total"]),
        ("dead now", summary["dead"]["total"]),
    ]
    return '<div class="tiles">' + "".join(
        f'<div class="tile">{escape(label)}<b>{_text(value)}</b></div>' for label, value in tiles
    ) + "</div>"


def _hour_label(hour: str) -> str:
    return hour[5:13].replace("T", " ") + "h"


def _per_hour(summary: dict[str, Any]) -> str:
    hours: list[dict[str, Any]] = summary["hours"]
    labels = [_hour_label(h["hour"]) for h in hours]
    volume = svg.stacked_bar_chart("Messages per hour (by creation time)", labels, [
        ("done", [h["done"] for h in hours]),
        ("in flight", [h["pending_send"] + h["unacked"] for h in hours]),
        ("cancelled", [h["cancelled"] for h in hours]),
        ("dead", [h["dead"] for h in hours]),
    ])
    latency = [
        svg.line_chart(f"{stage.replace('_', ' ')} (seconds)", labels, [
            (level, [h["stages"][stage][level] for h in hours]) for level in ("p50", "p95", "p99")
        ], svg.seconds_label)
        for stage in STAGES
    ]
    return volume + "".join(latency)


def _sla(summary: dict[str, Any]) -> str:
    topics = summary["topics"]
    chart = svg.bar_chart("SLA compliance per app / topic", [
        (f"{t['app']} / {t['topic']}", t["sla_compliance"]) for t in topics
    ], svg.percent_label, top=1.0)
    table = _table(
        ["app", "topic", "target", "met", "missed", "pending", "compliance"],
        [[t["app"], t["topic"], svg.seconds_label(t["sla_target_seconds"]), t["sla_met"],
          t["sla_missed"], t["sla_pending"],
          None if t["sla_compliance"] is None else svg.percent_label(t["sla_compliance"])]
         for t in topics], keys=2)
    return chart + table


def _topics(summary: dict[str, Any]) -> str:
    def p95(topic: dict[str, Any], stage: str) -> str | None:
        value = topic["stages"][stage]["p95"]
        return None if value is None else svg.seconds_label(value)

    return _table(
        ["app", "topic", "messages", "done", "cancelled", "dead", "check-backs / prepared msg",
         "deliveries / published msg", *[f"p95 {s.replace('_', ' ')}" for s in STAGES]],
        [[t["app"], t["topic"], t["messages"], t["done"], t["cancelled"], t["dead"],
          t["checkbacks_per_message"], t["deliveries_per_message"],
          *[p95(t, s) for s in STAGES]] for t in summary["topics"]], keys=2)


def _distributions(summary: dict[str, Any]) -> str:
    charts = []
    for name, title in (("checkbacks_per_message", "Check-backs per prepared message"),
                        ("deliveries_per_message", "Deliveries per sent message")):
        rows = summary["distributions"][name]
        charts.append(svg.bar_chart(title, [(str(r["value"]), r["messages"]) for r in rows]))
    return "".join(charts)


HEADINGS = {"dead_reason": "reason", "message_id": "message", "created_at": "created",
            "overdue_seconds": "overdue (s)", "check_count": "check-backs",
            "delivery_count": "deliveries"}


def _listing(listing: dict[str, Any], columns: Sequence[str], source: str) -> str:
    total, shown = listing["total"], len(listing["items"])
    if total == 0:
        return '<p class="muted">none</p>'
    note = (f"{total} in all." if shown >= total else
            f"{total} in all; the first {shown} are shown ({source} has every one).")
    rows = [[item[c] for c in columns] for item in listing["items"]]
    return (f'<p class="muted">{escape(note)}</p>'
            + _table([HEADINGS.get(c, c) for c in columns], rows, keys=5))


def _header(summary: dict[str, Any]) -> str:
    window = summary["window"]
    pct = summary["percentiles"]
    method = f"{pct['method']}, {'exact' if pct['exact'] else 'approximate'}"
    facts = [("window", f"{window['since'] or 'start'} → {window['until'] or 'now'}"),
             ("as of", summary["as_of"]), ("source", summary["source"]),
             ("generated", summary["generated_at"]), ("percentiles", method),
             ("stuck grace", f"{summary['grace_seconds']:g} s")]
    return "<p>" + " · ".join(f"{escape(k)}: <b>{escape(str(v))}</b>" for k, v in facts) + "</p>"


def render(summary: dict[str, Any]) -> str:
    totals = summary["totals"] or {}
    outcomes = svg.bar_chart("Outcomes (messages created in the window)",
                             [(label, totals.get(key, 0)) for key, label in OUTCOMES])
    stuck_columns = ("kind", "message_id", "app", "topic", "state", "deadline",
                     "overdue_seconds", "check_count", "delivery_count")
    dead_columns = ("dead_reason", "message_id", "app", "topic", "state", "created_at",
                    "check_count", "delivery_count")
    sections = [
        ("Overview", _tiles(summary) + outcomes),
        ("Per hour", _per_hour(summary)),
        ("SLA compliance", _sla(summary)),
        ("Per app and topic", _topics(summary)),
        ("Check-backs and deliveries", _distributions(summary)),
        ("Stuck now (pending-send or unacked past their deadline)",
         _listing(summary["stuck"], stuck_columns, "stuck.parquet")),
        ("Dead now", _listing(summary["dead"], dead_columns, "stuck.parquet")),
    ]
    body = "".join(f"<h2>{escape(title)}</h2>{content}" for title, content in sections)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>RMS SLA report</title>"
        f"<style>{STYLE}</style></head><body><h1>RMS SLA report</h1>"
        f"{_header(summary)}{body}</body></html>\n"
    )
