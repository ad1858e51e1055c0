"""The bench's verifier fails on a lost confirmed message or a published cancelled one (fed
fabricated histories), and the arithmetic of the report is right."""

from __future__ import annotations

from bench.stages import load_stages
from bench.stats import percentile, slope_per_minute, summarize
from bench.verify import CANCELLED, CONFIRMED, Stored, verify


def _done(message_id: str) -> Stored:
    return Stored(message_id, "done", 1, 100.0, 100.1, 100.3)


def _deleted(message_id: str) -> Stored:
    return Stored(message_id, "deleted", 0, 100.0, None, None)


def test_a_clean_history_passes() -> None:
    expected = {"a": CONFIRMED, "b": CONFIRMED, "c": CANCELLED}
    stored = {"a": _done("a"), "b": _done("b"), "c": _deleted("c")}
    verdict = verify(expected, stored, {"a": [(1, 100.2)], "b": [(1, 100.2)]})
    assert verdict.passed and verdict.checked == 3 and verdict.samples == []


def test_a_lost_confirmed_message_fails() -> None:
    verdict = verify({"a": CONFIRMED, "b": CONFIRMED}, {"a": _done("a")}, {"a": [(1, 1.0)]})
    assert not verdict.passed
    assert verdict.problems == 1
    assert "b: confirmed but not in the database" in verdict.samples[0]


def test_a_confirmed_message_not_done_or_never_received_fails() -> None:
    sent = Stored("a", "sent", 1, 100.0, 100.1, None)
    assert not verify({"a": CONFIRMED}, {"a": sent}, {"a": [(1, 1.0)]}).passed
    assert not verify({"a": CONFIRMED}, {"a": _done("a")}, {}).passed
    unpublished = Stored("a", "done", 0, 100.0, 100.1, 100.3)
    assert not verify({"a": CONFIRMED}, {"a": unpublished}, {"a": [(1, 1.0)]}).passed
    acked_twice = Stored("a", "done", 1, 100.0, 100.1, 100.3, acked=2)
    assert not verify({"a": CONFIRMED}, {"a": acked_twice}, {"a": [(1, 1.0)]}).passed
    done_first = Stored("a", "done", 1, 100.0, 100.5, 100.3)
    assert not verify({"a": CONFIRMED}, {"a": done_first}, {"a": [(1, 1.0)]}).passed


def test_a_published_cancelled_message_fails() -> None:
    received = verify({"c": CANCELLED}, {"c": _deleted("c")}, {"c": [(1, 1.0)]})
    assert not received.passed and "cancelled but published" in received.samples[0]
    with_event = verify({"c": CANCELLED}, {"c": Stored("c", "deleted", 1, 1.0, None, None)}, {})
    assert not with_event.passed
    delivered = verify({"c": CANCELLED}, {"c": _done("c")}, {})
    assert not delivered.passed and "state is 'done'" in delivered.samples[0]


def test_percentiles_and_summary() -> None:
    values = [n / 1000 for n in range(1, 101)]  # 1..100 ms
    assert percentile(values, 50) == 0.05
    assert percentile(values, 99) == 0.099
    figures = summarize(values)
    assert figures["count"] == 100 and figures["p95_ms"] == 95.0 and figures["max_ms"] == 100.0
    assert summarize([])["p99_ms"] is None


def test_slope_per_minute() -> None:
    assert slope_per_minute([(0.0, 100.0), (60.0, 110.0), (120.0, 120.0)]) == 10.0
    assert slope_per_minute([(0.0, 5.0)]) == 0.0


def test_stages_follow_their_definitions() -> None:
    transactions = [[0, CONFIRMED, 10.0, 10.010, 10.030], [1, CANCELLED, 10.0, 10.01, 10.02],
                    [2, "error", 10.0, None, None]]
    stored = {"m-0": Stored("m-0", "done", 1, 10.0, 10.02, 10.100)}
    stages = load_stages(transactions, lambda n: [f"m-{n}"], {"m-0": [(1, 10.040)]}, stored)
    assert [round(x, 3) for x in stages.prepare] == [0.010]
    assert [round(x, 3) for x in stages.confirm] == [0.020]
    assert [round(x, 3) for x in stages.record] == [0.010]
    assert [round(x, 3) for x in stages.done] == [0.060]
