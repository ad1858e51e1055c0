"""The full path's verdicts (``bench.fullpath``): each full-database row against its partner on
the empty database, with the targets of the issue: happy >= 0.9 of the throughput and confirm
p99 <= 1.5x; check-back and redelivery >= 0.8."""

from __future__ import annotations

from typing import Any

import pytest

from bench.fullpath import _compare, render


def _row(path: str, throughput: float, p99: float | None) -> dict[str, Any]:
    stage = "confirm" if path == "happy" else "resolve"
    return {"path": path, "throughput": throughput, "unit": "tx/s",
            "stages": {stage: {"count": 1, "p99_ms": p99} if p99 is not None else {}}}


@pytest.mark.parametrize(("full", "p99", "met"), [
    (900.0, 15.0, True),  # exactly 0.9 and 1.5x
    (899.0, 10.0, False),  # throughput short
    (1000.0, 15.1, False),  # p99 over
    (1000.0, None, False),  # no p99 measured: not met
])
def test_happy(full: float, p99: float | None, met: bool) -> None:
    verdict = _compare(_row("happy", full, p99), _row("happy", 1000.0, 10.0))
    assert verdict["met"] is met
    assert verdict["throughput_share"] == round(full / 1000, 3)
    assert verdict["p99_stage"] == "confirm" and verdict["empty_p99_ms"] == 10.0


@pytest.mark.parametrize(("path", "full", "met"), [
    ("checkback", 800.0, True), ("checkback", 799.0, False), ("redelivery", 2000.0, True)])
def test_workers_need_only_their_share(path: str, full: float, met: bool) -> None:
    verdict = _compare(_row(path, full, 900.0), _row(path, 1000.0, 10.0))
    assert verdict["met"] is met and verdict["p99_stage"] == "resolve"


def test_an_empty_run_without_throughput_is_not_met() -> None:
    assert _compare(_row("checkback", 10.0, 1.0), _row("checkback", 0.0, 1.0))["met"] is False


def test_render_says_what_was_met() -> None:
    row = _row("happy", 950.0, 12.0) | {"load": "happy c=32 full"}
    shared = {"seed": {"messages": 5_000_000, "seconds": 400.0}, "autovacuum": "on",
              "plans": [{"name": "prepare", "seq_scan": False}],
              "retention": {"removed": 120_000, "seconds": 60.0, "per_s": 2000.0,
                            "per_day": 172_800_000, "sizing_per_day": 10_000_000, "duty_cycle": 0.25,
                            "ended_by_itself": False}}
    row["full"] = _compare(row, _row("happy", 1000.0, 10.0)) | shared
    text = "\n".join(render([row]))
    assert "5,000,000 done messages seeded in 400 s; autovacuum on" in text
    assert "rms retention run at duty cycle 0.25 beside the load" in text
    assert "950 vs empty 1,000 tx/s (0.95); confirm p99 12.00 vs 10.00 ms (1.20x)" in text
    assert ": met" in text and "2,000/s, 172,800,000 a day" in text
    assert "every hot statement uses an index" in text
    assert render([_row("happy", 1.0, 1.0)]) == []
