"""The report over the hand-written history (``tests/integration/spark/history.py``), read from PostgreSQL
over JDBC and from an ``rms export``: every figure below was worked out by hand from the
comments in that module (nearest-rank percentiles: the value at rank ceil(p * n))."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.integration.spark.history import AS_OF, SINCE, UNTIL, Report, ts

pytestmark = pytest.mark.spark

STAGE_NAMES = ("prepare_to_confirm", "confirm_to_first_publish", "first_publish_to_done",
               "prepare_to_done")
Stage = tuple[int, float | None, float | None, float | None]  # count, p50, p95, p99
NO_STAGE: Stage = (0, None, None, None)


def metrics(stages: dict[str, Stage], **values: Any) -> dict[str, Any]:
    """Expected metrics: counters not given are 0, ratios not given are null."""
    row: dict[str, Any] = dict.fromkeys((
        "messages", "prepared", "one_shot", "sent", "confirmed_by_producer",
        "confirmed_by_check_back", "confirmed_by_admin", "cancelled", "cancelled_by_producer",
        "rolled_back_by_check_back", "cancelled_by_admin", "done", "pending_send", "unacked",
        "dead", "dead_check_exhausted", "dead_delivery_exhausted", "delayed", "scheduled",
        "checkbacks",
        "checkbacks_committed", "checkbacks_rolled_back", "checkbacks_unknown",
        "checkbacks_other", "messages_checked", "checkbacks_max", "deliveries", "messages_published",
        "deliveries_max", "redelivered_messages", "publish_failures", "resends", "sla_met",
        "sla_missed", "sla_pending"), 0)
    row |= {"checkbacks_per_message": None, "deliveries_per_message": None,
            "sla_compliance": None}
    for name in STAGE_NAMES:
        count, p50, p95, p99 = stages.get(name, NO_STAGE)
        row |= {f"{name}_count": count, f"{name}_p50": p50, f"{name}_p95": p95,
                f"{name}_p99": p99}
    return row | values


def stages(p2c: Stage, c2p: Stage, pd: Stage, p2d: Stage) -> dict[str, Stage]:
    return dict(zip(STAGE_NAMES, (p2c, c2p, pd, p2d), strict=True))


# shop / orders.paid, 10:00 — m1..m6
PAID_10 = metrics(
    stages((2, 2, 30, 30), (3, 1, 1, 1), (3, 2, 69, 69), (3, 5, 100, 100)),
    messages=6, prepared=5, one_shot=1, sent=3, confirmed_by_producer=1,
    confirmed_by_check_back=1, cancelled=2, cancelled_by_producer=1,
    rolled_back_by_check_back=1, done=3, dead=1, dead_check_exhausted=1,
    checkbacks=6, checkbacks_committed=1, checkbacks_rolled_back=1, checkbacks_unknown=4,
    messages_checked=3, checkbacks_per_message=6 / 5, checkbacks_max=3,
    deliveries=4, messages_published=3, deliveries_per_message=4 / 3, deliveries_max=2,
    redelivered_messages=1, sla_met=2, sla_missed=1, sla_compliance=2 / 3,
)
# shop / orders.paid, 11:00 — m7, m8, m9
PAID_11 = metrics(
    stages((2, 1, 900, 900), (2, 1, 1, 1), NO_STAGE, NO_STAGE),
    messages=3, prepared=3, sent=2, confirmed_by_producer=1, confirmed_by_admin=1,
    pending_send=1, unacked=1, dead=1, dead_delivery_exhausted=1,
    checkbacks=1, checkbacks_unknown=1, messages_checked=1, checkbacks_per_message=1 / 3,
    checkbacks_max=1, deliveries=4, messages_published=2, deliveries_per_message=2.0,
    deliveries_max=3, redelivered_messages=1, sla_missed=2, sla_compliance=0.0,
)
# shop / orders.shipped, 11:00 — m10, m11, m19
SHIPPED_11 = metrics(
    stages((3, 1, 1, 1), (2, 0.5, 1, 1), (2, 19, 2399, 2399), (3, 31, 2401, 2401)),
    messages=3, prepared=3, sent=3, confirmed_by_producer=3, done=3,
    checkbacks_per_message=0.0, deliveries=4, messages_published=2,
    deliveries_per_message=2.0, deliveries_max=3, redelivered_messages=1, resends=1,
    sla_met=2, sla_missed=1, sla_compliance=2 / 3,
)
# billing / refunds, 12:00 — r01..r20
REFUNDS_12 = metrics(
    stages((20, 10, 19, 20), (20, 1, 1, 1), (20, 30, 57, 60), (20, 41, 77, 81)),
    messages=20, prepared=20, sent=20, confirmed_by_producer=20, done=20,
    checkbacks_per_message=0.0, deliveries=20, messages_published=20,
    deliveries_per_message=1.0, deliveries_max=1, sla_met=19, sla_missed=1,
    sla_compliance=0.95,
)
# billing / invoices, 2026-03-03 00:00 — m12, m13, m14, m15, m18
INVOICES_00 = metrics(
    stages((2, 2, 4170, 4170), (3, 1, 6, 6), (1, 1, 1, 1), (2, 7, 9, 9)),
    messages=5, prepared=2, one_shot=2, sent=4, confirmed_by_check_back=1, done=2,
    pending_send=1, unacked=2, checkbacks=4, checkbacks_committed=1, checkbacks_unknown=3,
    messages_checked=2, checkbacks_per_message=2.0, checkbacks_max=3, deliveries=3,
    messages_published=3, deliveries_per_message=1.0, deliveries_max=1, publish_failures=1,
    sla_met=2, sla_missed=1, sla_pending=1, sla_compliance=2 / 3,
)
# shop / orders.paid over its day (10:00 and 11:00 together)
PAID_DAY = metrics(
    stages((4, 2, 900, 900), (5, 1, 1, 1), (3, 2, 69, 69), (3, 5, 100, 100)),
    messages=9, prepared=8, one_shot=1, sent=5, confirmed_by_producer=2,
    confirmed_by_check_back=1, confirmed_by_admin=1, cancelled=2, cancelled_by_producer=1,
    rolled_back_by_check_back=1, done=3, pending_send=1, unacked=1, dead=2,
    dead_check_exhausted=1, dead_delivery_exhausted=1, checkbacks=7, checkbacks_committed=1,
    checkbacks_rolled_back=1, checkbacks_unknown=5, messages_checked=4,
    checkbacks_per_message=7 / 8, checkbacks_max=3, deliveries=8, messages_published=5,
    deliveries_per_message=8 / 5, deliveries_max=3, redelivered_messages=2, sla_met=2,
    sla_missed=3, sla_compliance=0.4,
)
# every app and topic at 11:00 (m7..m11, m19)
ALL_11 = metrics(
    stages((5, 1, 900, 900), (4, 1, 1, 1), (2, 19, 2399, 2399), (3, 31, 2401, 2401)),
    messages=6, prepared=6, sent=5, confirmed_by_producer=4, confirmed_by_admin=1, done=3,
    pending_send=1, unacked=1, dead=1, dead_delivery_exhausted=1, checkbacks=1,
    checkbacks_unknown=1, messages_checked=1, checkbacks_per_message=1 / 6, checkbacks_max=1,
    deliveries=8, messages_published=4, deliveries_per_message=2.0, deliveries_max=3,
    redelivered_messages=2, resends=1, sla_met=2, sla_missed=3, sla_compliance=0.4,
)
# the whole window: 37 messages
TOTALS = metrics(
    stages((29, 9, 900, 4170), (30, 1, 1, 6), (26, 27, 69, 2399), (28, 33, 100, 2401)),
    messages=37, prepared=33, one_shot=3, sent=32, confirmed_by_producer=25,
    confirmed_by_check_back=2, confirmed_by_admin=1, cancelled=2, cancelled_by_producer=1,
    rolled_back_by_check_back=1, done=28, pending_send=2, unacked=3, dead=2,
    dead_check_exhausted=1, dead_delivery_exhausted=1, checkbacks=11, checkbacks_committed=2,
    checkbacks_rolled_back=1, checkbacks_unknown=8, messages_checked=6,
    checkbacks_per_message=11 / 33, checkbacks_max=3, deliveries=35, messages_published=30,
    deliveries_per_message=35 / 30, deliveries_max=3, redelivered_messages=3,
    publish_failures=1, resends=1, sla_met=25, sla_missed=6, sla_pending=1,
    sla_compliance=25 / 31,
)
HOURLY = {
    ("shop", "orders.paid", "2026-03-02T10:00", 10.0): PAID_10,
    ("shop", "orders.paid", "2026-03-02T11:00", 10.0): PAID_11,
    ("shop", "orders.shipped", "2026-03-02T11:00", 30.0): SHIPPED_11,
    ("billing", "refunds", "2026-03-02T12:00", 60.0): REFUNDS_12,
    ("billing", "invoices", "2026-03-03T00:00", 60.0): INVOICES_00,
}


@pytest.fixture(params=["jdbc", "parquet"])
def spark_hand_report(request: pytest.FixtureRequest,
                      spark_hand_reports: dict[str, Report]) -> Report:
    return spark_hand_reports[request.param]


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    """A summary.json metrics object back to the flat column names of the Parquet tables."""
    flat = {k: v for k, v in row.items() if k != "stages"}
    for stage, values in row["stages"].items():
        flat |= {f"{stage}_{part}": value for part, value in values.items()}
    return flat


def _hour(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M")


def test_hourly_table_matches_hand_figures(spark_hand_report: Report) -> None:
    rows = pq.read_table(spark_hand_report.out / "hourly.parquet").to_pylist()
    actual = {(r["app"], r["topic"], _hour(r["hour"]), r["sla_target_seconds"]): r for r in rows}
    assert list(actual) == sorted(HOURLY, key=lambda k: (k[0], k[1], k[2]))
    for key, expected in HOURLY.items():
        assert {name: actual[key][name] for name in expected} == expected, key


def test_daily_and_topic_tables_combine_the_hours(spark_hand_report: Report) -> None:
    daily = pq.read_table(spark_hand_report.out / "daily.parquet").to_pylist()
    assert [(r["app"], r["topic"], r["day"].isoformat()) for r in daily] == [
        ("billing", "invoices", "2026-03-03"), ("billing", "refunds", "2026-03-02"),
        ("shop", "orders.paid", "2026-03-02"), ("shop", "orders.shipped", "2026-03-02")]
    topics = {(r["app"], r["topic"]): r
              for r in pq.read_table(spark_hand_report.out / "topics.parquet").to_pylist()}
    for expected, day_row, topic in ((INVOICES_00, daily[0], ("billing", "invoices")),
                                     (REFUNDS_12, daily[1], ("billing", "refunds")),
                                     (PAID_DAY, daily[2], ("shop", "orders.paid")),
                                     (SHIPPED_11, daily[3], ("shop", "orders.shipped"))):
        assert {name: day_row[name] for name in expected} == expected, topic
        assert {name: topics[topic][name] for name in expected} == expected, topic


def test_summary_totals_hours_and_days(spark_hand_report: Report) -> None:
    summary = spark_hand_report.summary
    assert _flat(summary["totals"]) == TOTALS
    hours = {h["hour"]: _flat(h) for h in summary["hours"]}
    assert list(hours) == ["2026-03-02T10:00:00Z", "2026-03-02T11:00:00Z",
                           "2026-03-02T12:00:00Z", "2026-03-03T00:00:00Z"]
    assert hours["2026-03-02T10:00:00Z"] == {"hour": "2026-03-02T10:00:00Z", **PAID_10}
    assert hours["2026-03-02T11:00:00Z"] == {"hour": "2026-03-02T11:00:00Z", **ALL_11}
    assert hours["2026-03-03T00:00:00Z"] == {"hour": "2026-03-03T00:00:00Z", **INVOICES_00}
    days = {d["day"]: d for d in summary["days"]}
    assert list(days) == ["2026-03-02", "2026-03-03"]
    assert _flat(days["2026-03-03"]) == {"day": "2026-03-03", **INVOICES_00}
    first = days["2026-03-02"]
    assert (first["messages"], first["done"], first["sla_met"], first["sla_missed"]) == (
        32, 26, 23, 5)
    assert first["stages"]["prepare_to_confirm"] == {"count": 27, "p50": 9.0, "p95": 30.0,
                                                     "p99": 900.0}


def test_sla_compliance_per_topic_with_targets(spark_hand_report: Report) -> None:
    topics = {(t["app"], t["topic"]): t for t in spark_hand_report.summary["topics"]}
    assert {k: (t["sla_target_seconds"], t["sla_met"], t["sla_missed"], t["sla_pending"],
                t["sla_compliance"]) for k, t in topics.items()} == {
        ("billing", "invoices"): (60.0, 2, 1, 1, 2 / 3),
        ("billing", "refunds"): (60.0, 19, 1, 0, 0.95),
        ("shop", "orders.paid"): (10.0, 2, 3, 0, 0.4),
        ("shop", "orders.shipped"): (30.0, 2, 1, 0, 2 / 3),
    }
    assert spark_hand_report.summary["sla_targets"] == {
        "default_seconds": 60.0,
        "topics": [{"pattern": "orders.paid", "seconds": 10.0},
                   {"pattern": "orders.*", "seconds": 30.0}],
    }


def test_stuck_and_dead_lists(spark_hand_report: Report) -> None:
    summary = spark_hand_report.summary
    stuck = summary["stuck"]
    assert (stuck["total"], stuck["by_kind"]) == (4, {"pending-send": 2, "unacked": 2})
    assert [(i["message_id"], i["kind"], i["deadline"], i["overdue_seconds"], i["age_seconds"])
            for i in stuck["items"]] == [
        ("m16", "pending-send", "2026-03-01T09:00:10Z", 147590.0, 147600.0),
        ("m9", "pending-send", "2026-03-02T11:10:10Z", 53390.0, 53400.0),
        ("m8", "unacked", "2026-03-02T11:21:01Z", 52739.0, 53700.0),
        ("m13", "unacked", "2026-03-03T00:11:01Z", 6539.0, 6600.0),
    ]
    dead = summary["dead"]
    assert (dead["total"], dead["by_dead_reason"]) == (
        3, {"check-exhausted": 1, "delivery-exhausted": 2})
    assert [(i["message_id"], i["dead_reason"], i["state"], i["deadline"])
            for i in dead["items"]] == [
        ("m20", "delivery-exhausted", "sent", None),
        ("m6", "check-exhausted", "pending-send", None),
        ("m7", "delivery-exhausted", "sent", None),
    ]
    table = pq.read_table(spark_hand_report.out / "stuck.parquet").to_pylist()
    assert [r["message_id"] for r in table] == ["m16", "m9", "m8", "m13", "m20", "m6", "m7"]
    assert table[0]["created_at"] == ts("2026-03-01T09:00:00")


def test_acks_per_consumer(spark_hand_report: Report) -> None:
    """shop / orders.paid (target 10 s): points acked m1 (2 s after its publish, 3 s after its
    confirm), m2 (69 s, 70 s: missed) and m5 (stored before the publish: 0 s; 0.25 s after
    the send); invoicing acked m1 (1 s, 2 s). Ranks of [0, 2, 69]: 2, 3, 3."""
    rows = {row["consumer"]: row for row in spark_hand_report.summary["consumers"]
            if (row["app"], row["topic"]) == ("shop", "orders.paid")}
    common = {"app": "shop", "topic": "orders.paid", "sla_target_seconds": 10.0}
    assert rows == {
        "invoicing": common | {
            "consumer": "invoicing", "acked": 1, "sla_met": 1, "sla_missed": 0,
            "sla_compliance": 1.0, "stuck": 0, "dead": 0, "publish_to_ack_count": 1,
            "publish_to_ack_p50": 1.0,
            "publish_to_ack_p95": 1.0, "publish_to_ack_p99": 1.0},
        "points": common | {
            "consumer": "points", "acked": 3, "sla_met": 2, "sla_missed": 1,
            "sla_compliance": 2 / 3, "stuck": 0, "dead": 0, "publish_to_ack_count": 3,
            "publish_to_ack_p50": 2.0,
            "publish_to_ack_p95": 69.0, "publish_to_ack_p99": 69.0},
    }
    table = pq.read_table(spark_hand_report.out / "consumers.parquet").to_pylist()
    assert [r for r in table if r["topic"] == "orders.paid"] == [
        rows["invoicing"], rows["points"]]


def test_checkback_and_delivery_distributions(spark_hand_report: Report) -> None:
    distributions = spark_hand_report.summary["distributions"]
    assert distributions["checkbacks_per_message"] == [
        {"value": 0, "messages": 27}, {"value": 1, "messages": 3},
        {"value": 2, "messages": 1}, {"value": 3, "messages": 2}]
    assert distributions["deliveries_per_message"] == [
        {"value": 0, "messages": 2}, {"value": 1, "messages": 27},
        {"value": 2, "messages": 1}, {"value": 3, "messages": 2}]


def test_summary_names_the_populations(spark_hand_report: Report) -> None:
    """Each ratio names its numerator and denominator, each histogram its population: the
    deliveries histogram counts sent messages (0 included), the ratio divides by published
    ones."""
    summary = spark_hand_report.summary
    assert summary["ratios"] == {
        "checkbacks_per_message": {"numerator": "checkbacks", "denominator": "prepared"},
        "deliveries_per_message": {"numerator": "deliveries",
                                   "denominator": "messages_published"},
        "sla_compliance": {"numerator": "sla_met", "denominator": "sla_met + sla_missed"},
    }
    assert summary["distribution_populations"] == {"checkbacks_per_message": "prepared",
                                                   "deliveries_per_message": "sent"}
    totals = summary["totals"]
    for name, population in summary["distribution_populations"].items():
        histogram = summary["distributions"][name]
        assert sum(bucket["messages"] for bucket in histogram) == totals[population], name


def test_summary_context(spark_hand_report: Report) -> None:
    summary = spark_hand_report.summary
    assert summary["window"] == {"since": SINCE, "until": UNTIL}
    assert summary["as_of"] == AS_OF
    assert summary["grace_seconds"] == 60.0
    assert summary["percentiles"]["method"] == "nearest-rank"
    assert summary["percentiles"]["exact"] is True
    assert (spark_hand_report.out / "report.html").read_text().startswith("<!DOCTYPE html>")


def test_jdbc_and_parquet_sources_give_identical_outputs(
        spark_hand_reports: dict[str, Report]) -> None:
    jdbc, parquet = spark_hand_reports["jdbc"], spark_hand_reports["parquet"]
    for name in ("hourly", "daily", "topics", "stuck"):
        assert pq.read_table(jdbc.out / f"{name}.parquet").equals(
            pq.read_table(parquet.out / f"{name}.parquet")), name

    def comparable(summary: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in summary.items() if k not in {"source", "generated_at"}}

    assert comparable(jdbc.summary) == comparable(parquet.summary)
    assert (jdbc.summary["source"], parquet.summary["source"]) == ("jdbc", "parquet")
