"""Odd histories give the documented results (``spark/facts.py``, ``spark/stuck.py``), never a
crash: an empty window or history, clocks that disagree, missing and duplicated events,
malformed details, dead messages without a reason, hostile topic names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from history.options import Window
from spark.inputs import ParquetSource
from spark.report import ReportConfig, run_report
from tests.integration.spark.history import Ev, History, Msg, ev, ts, write_export

pytestmark = pytest.mark.spark

NOW = ts("2026-05-01T12:00:00")
HOSTILE = "x<script>alert(1)</script>"


def _odd_history() -> History:
    t = "2026-05-01T"
    return History(
        messages=[
            # events stamped before the row's creation time (another clock): stages clamp at 0
            Msg("s1", "odd", "skew", "done", ts(t + "10:00:10"),
                confirmed_at=ts(t + "10:00:05"), done_at=ts(t + "10:00:07")),
            # done with no done time and no acked event: done, but no latency, SLA pending
            Msg("d1", "odd", "no-done-time", "done", ts(t + "10:00:00"),
                confirmed_at=ts(t + "10:00:01")),
            # duplicated confirm and ack events, a malformed check-back detail
            Msg("u1", "odd", "dupes", "done", ts(t + "10:00:00"),
                confirmed_at=ts(t + "10:00:02"), done_at=ts(t + "10:00:04")),
            # dead without a reason
            Msg("x1", "odd", "dead-no-reason", "pending-send", ts(t + "10:00:00"), dead=True),
            # pending-send without a deadline: no worker will pick it up
            Msg("n1", "odd", "no-deadline", "pending-send", ts(t + "09:00:00")),
            # confirmed 10 s before now, deadline ahead: in flight, not stuck, SLA pending
            Msg("f1", "odd", "in-flight", "sent", ts(t + "11:59:00"),
                confirmed_at=ts(t + "11:59:50"), next_delivery_at=ts(t + "12:00:50")),
            # a topic name that must be escaped in the page
            Msg("h1", "odd", HOSTILE, "done", ts(t + "10:00:00"),
                confirmed_at=ts(t + "10:00:00"), done_at=ts(t + "10:00:01")),
            # delayed: confirmed at 10:00:01 for 10:05, published then and done 2 s later (its
            # SLA clock starts at 10:05); one still waiting at "now" for 13:00
            Msg("dl1", "odd", "delayed", "done", ts(t + "10:00:00"),
                confirmed_at=ts(t + "10:00:01"), done_at=ts(t + "10:05:02"),
                deliver_after=ts(t + "10:05:00")),
            Msg("dl2", "odd", "delayed", "sent", ts(t + "11:00:00"),
                confirmed_at=ts(t + "11:00:01"), next_delivery_at=ts(t + "13:00:00"),
                deliver_after=ts(t + "13:00:00")),
            # check-backs answered with an outcome RMS does not name, and with none
            Msg("o1", "odd", "outcomes", "done", ts(t + "10:00:00"),
                confirmed_at=ts(t + "10:00:40"), done_at=ts(t + "10:00:41")),
        ],
        events=[
            ev("s1", t + "10:00:00", "prepared"),
            ev("s1", t + "10:00:05", "confirmed", by="producer"),
            ev("s1", t + "10:00:06", "published", delivery=1),
            ev("s1", t + "10:00:07", "acked", via="http"),
            ev("d1", t + "10:00:00", "prepared"),
            ev("d1", t + "10:00:01", "confirmed", by="producer"),
            ev("u1", t + "10:00:00", "prepared"),
            ev("u1", t + "10:00:02", "confirmed", by="producer"),
            ev("u1", t + "10:00:01", "confirmed", by="admin"),
            Ev("u1", ts(t + "10:00:01"), "checked", "not json at all"),
            ev("u1", t + "10:00:03", "published"),
            ev("u1", t + "10:00:04", "acked", via="http"),
            ev("u1", t + "10:00:05", "acked", via="ack-topic"),
            ev("x1", t + "10:00:00", "prepared"),
            Ev("x1", ts(t + "10:00:09"), "dead", {}),
            ev("f1", t + "11:59:00", "prepared"),
            ev("f1", t + "11:59:50", "confirmed", by="producer"),
            ev("f1", t + "11:59:51", "published", delivery=1),
            ev("h1", t + "10:00:00", "sent"),
            ev("dl1", t + "10:00:00", "prepared"),
            ev("dl1", t + "10:00:01", "confirmed", by="producer"),
            ev("dl1", t + "10:05:00.5", "published", delivery=1),
            ev("dl1", t + "10:05:02", "acked", via="http"),
            ev("dl2", t + "11:00:00", "prepared"),
            ev("dl2", t + "11:00:01", "confirmed", by="producer"),
            ev("o1", t + "10:00:00", "prepared"),
            ev("o1", t + "10:00:10", "checked", attempt=1, outcome="timeout"),
            ev("o1", t + "10:00:20", "checked", attempt=2),
            ev("o1", t + "10:00:30", "checked", attempt=3, outcome="unknown"),
            ev("o1", t + "10:00:40", "checked", attempt=4, outcome="committed"),
            ev("o1", t + "10:00:40", "confirmed", by="check-back"),
        ],
    )


def _run(spark: Any, tmp: Path, history: History, window: Window = Window(),
         with_open: bool = True) -> dict[str, Any]:
    source = write_export(tmp / "export", history, exported_at=NOW, with_open=with_open)
    return run_report(spark, ReportConfig(out=tmp / "out", source=ParquetSource(source),
                                          window=window))


@pytest.fixture(scope="module")
def spark_odd_report(spark_session: Any,
                     tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    tmp = tmp_path_factory.mktemp("odd")
    return _run(spark_session, tmp, _odd_history()), tmp / "out"


def _topic(summary: dict[str, Any], topic: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [t for t in summary["topics"] if t["topic"] == topic]
    assert len(found) == 1, topic
    return found[0]


def test_stages_that_end_before_they_start_count_as_zero(
        spark_odd_report: tuple[dict[str, Any], Path]) -> None:
    skew = _topic(spark_odd_report[0], "skew")["stages"]
    assert skew["prepare_to_confirm"] == {"count": 1, "p50": 0.0, "p95": 0.0, "p99": 0.0}
    assert skew["confirm_to_first_publish"]["p50"] == 1.0
    assert skew["first_publish_to_done"]["p50"] == 1.0
    assert skew["prepare_to_done"]["p50"] == 0.0


def test_done_without_a_done_time_is_done_but_unmeasured(
        spark_odd_report: tuple[dict[str, Any], Path]) -> None:
    topic = _topic(spark_odd_report[0], "no-done-time")
    assert (topic["done"], topic["sla_met"], topic["sla_missed"], topic["sla_pending"]) == (
        1, 0, 0, 1)
    assert topic["sla_compliance"] is None
    assert topic["stages"]["prepare_to_done"] == {"count": 0, "p50": None, "p95": None,
                                                  "p99": None}


def test_duplicates_and_malformed_details(spark_odd_report: tuple[dict[str, Any], Path]) -> None:
    topic = _topic(spark_odd_report[0], "dupes")
    # the earliest confirmed event names the actor; the row's confirm time wins
    assert (topic["confirmed_by_admin"], topic["confirmed_by_producer"]) == (1, 0)
    assert topic["stages"]["prepare_to_confirm"]["p50"] == 2.0
    # a check-back whose detail is not JSON counts, with no outcome
    assert (topic["checkbacks"], topic["checkbacks_committed"], topic["checkbacks_unknown"]) == (
        1, 0, 0)
    assert topic["checkbacks_other"] == 1
    assert (topic["done"], topic["deliveries"]) == (1, 1)
    assert topic["stages"]["first_publish_to_done"]["p50"] == 1.0


def test_delayed_messages_start_their_clock_at_the_delivery_time(
        spark_odd_report: tuple[dict[str, Any], Path]) -> None:
    topic = _topic(spark_odd_report[0], "delayed")
    assert (topic["delayed"], topic["scheduled"], topic["unacked"]) == (2, 1, 1)
    stages = topic["stages"]
    assert stages["confirm_to_first_publish"]["p50"] == 0.5  # not the 5 minutes' wait
    assert stages["prepare_to_done"]["p50"] == 2.0
    # done 2 s after its time: met; the waiting one is not late, only pending
    assert (topic["sla_met"], topic["sla_missed"], topic["sla_pending"]) == (1, 0, 1)
    assert spark_odd_report[0]["totals"]["scheduled"] >= 1


def test_check_back_outcomes_add_up(spark_odd_report: tuple[dict[str, Any], Path]) -> None:
    """An outcome other than committed, rolled_back or unknown, or none, counts as other."""
    summary, out = spark_odd_report
    topic = _topic(summary, "outcomes")
    assert (topic["checkbacks"], topic["checkbacks_committed"], topic["checkbacks_rolled_back"],
            topic["checkbacks_unknown"], topic["checkbacks_other"]) == (4, 1, 0, 1, 2)
    rows = [summary["totals"], *summary["hours"], *summary["days"], *summary["topics"]]
    rows += pq.read_table(out / "hourly.parquet").to_pylist()
    for row in rows:
        assert row["checkbacks"] == sum(row[f"checkbacks_{outcome}"] for outcome in (
            "committed", "rolled_back", "unknown", "other")), row
    assert summary["totals"]["checkbacks_other"] == 3


def test_dead_without_reason_and_stuck_without_deadline(
        spark_odd_report: tuple[dict[str, Any], Path]) -> None:
    summary = spark_odd_report[0]
    dead = _topic(summary, "dead-no-reason")
    assert (dead["dead"], dead["dead_check_exhausted"], dead["dead_delivery_exhausted"]) == (
        1, 0, 0)
    assert summary["dead"]["total"] == 1
    assert summary["dead"]["items"][0]["dead_reason"] is None
    assert summary["stuck"]["total"] == 1
    item = summary["stuck"]["items"][0]
    assert (item["message_id"], item["kind"], item["deadline"], item["overdue_seconds"]) == (
        "n1", "pending-send", None, None)


def test_in_flight_within_target_is_pending_and_not_stuck(
        spark_odd_report: tuple[dict[str, Any], Path]) -> None:
    summary = spark_odd_report[0]
    topic = _topic(summary, "in-flight")
    assert (topic["unacked"], topic["sla_pending"], topic["sla_missed"]) == (1, 1, 0)
    assert topic["stages"]["confirm_to_first_publish"]["p50"] == 1.0
    assert summary["as_of"] == "2026-05-01T12:00:00Z"  # the export's snapshot time


def test_page_escapes_data_and_needs_no_network(
        spark_odd_report: tuple[dict[str, Any], Path]) -> None:
    page = (spark_odd_report[1] / "report.html").read_text(encoding="utf-8")
    assert "<svg" in page
    assert "<script" not in page
    assert "x&lt;script&gt;alert(1)&lt;/script&gt;" in page
    for external in ("src=", "href=", "url(", "@import", "<link"):
        assert external not in page


def test_empty_window(spark_session: Any, tmp_path: Path) -> None:
    """Nothing created in the window: zero counts, null ratios and percentiles, empty series;
    the stuck list still covers everything created before --until."""
    summary = _run(spark_session, tmp_path, _odd_history(),
                   Window(since=ts("2026-06-01T00:00:00"), until=ts("2026-06-02T00:00:00")))
    totals = summary["totals"]
    assert totals["messages"] == 0 and totals["sla_met"] == 0 and totals["checkbacks_max"] == 0
    assert totals["sla_compliance"] is None and totals["checkbacks_per_message"] is None
    assert all(s == {"count": 0, "p50": None, "p95": None, "p99": None}
               for s in totals["stages"].values())
    assert (summary["hours"], summary["days"], summary["topics"]) == ([], [], [])
    assert summary["distributions"] == {"checkbacks_per_message": [],
                                        "deliveries_per_message": []}
    assert (summary["stuck"]["total"], summary["dead"]["total"]) == (1, 1)
    assert pq.read_table(tmp_path / "out" / "hourly.parquet").num_rows == 0
    assert "no data in this window" in (tmp_path / "out" / "report.html").read_text()


def test_empty_history_without_open_table(spark_session: Any, tmp_path: Path) -> None:
    """A foreign export without open/: the stuck list comes from the window's messages."""
    summary = _run(spark_session, tmp_path, History([], []), with_open=False)
    assert summary["totals"]["messages"] == 0
    assert (summary["stuck"]["total"], summary["dead"]["total"]) == (0, 0)
    assert summary["as_of"] == "2026-05-01T12:00:00Z"
