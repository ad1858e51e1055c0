"""The overload path's judgement, on made-up load-generator records: each target fails when
its condition is broken, and a run that meets them all passes."""

from __future__ import annotations

from typing import Any

from bench import targets
from bench.loadgen import CONFIRMED, REFUSED, TIMEOUT
from bench.overload import judge, verdicts

PHASES = ((10.0, 50.0), (30.0, 200.0), (10.0, 50.0))  # calm, overload, calm
START = 1000.0
CAPACITY = 100.0


def _healthy() -> dict[str, Any]:
    """A run that meets every target: 95 tx/s served in the overload at 40 ms per request,
    the rest refused in 2 ms with Retry-After; 20 ms per request when calm."""
    transactions: list[list[Any]] = []
    requests: list[list[Any]] = []
    n = 0

    def served(t0: float, each: float) -> None:
        nonlocal n
        transactions.append([n, CONFIRMED, t0, t0 + each, t0 + 2 * each])
        requests.append([n, "prepare", 201, t0, t0 + each, False])
        requests.append([n, "confirm", 200, t0 + each, t0 + 2 * each, False])
        n += 1

    for i in range(500):  # the calm phases: 50/s
        served(START + i / 50, 0.02)
        served(START + 40 + i / 50, 0.02)
    for i in range(30 * 200):  # the overload: 200/s offered, 95/s served
        t0 = START + 10 + i / 200
        if i % 200 < 95:
            served(t0, 0.04)
        else:
            transactions.append([n, REFUSED, t0, None, t0 + 0.002])
            requests.append([n, "prepare", 503, t0, t0 + 0.002, True])
            n += 1
    return {"schedule_start": START, "transactions": transactions, "requests": requests}


def test_a_run_meeting_every_target_passes() -> None:
    figures = judge(_healthy(), PHASES, CAPACITY)
    assert figures.failed_targets == (), figures
    assert figures.goodput == 95.0 and figures.refusals == 30 * 105
    assert figures.p99_prepare_ms == 40.0 and figures.refusal_max_ms == 2.0


def test_low_goodput_fails() -> None:
    run = _healthy()
    run["transactions"] = [t for t in run["transactions"] if not (1010 <= t[2] < 1020)]
    assert any("goodput" in f for f in judge(run, PHASES, CAPACITY).failed_targets)


def test_slow_answers_fail() -> None:
    run = _healthy()
    for t in run["transactions"]:
        if t[1] == CONFIRMED and 1010 <= t[2] < 1040:
            t[4] = t[3] + 0.3
    assert any("p99 confirm" in f for f in judge(run, PHASES, CAPACITY).failed_targets)


def test_slow_refusals_and_missing_retry_after_fail() -> None:
    run = _healthy()
    for r in run["requests"]:
        if r[2] == 503:
            r[4], r[5] = r[3] + 0.05, False
    failed = judge(run, PHASES, CAPACITY).failed_targets
    assert any("refusal" in f for f in failed) and any("Retry-After" in f for f in failed)


def test_timeouts_and_server_errors_fail() -> None:
    run = _healthy()
    run["requests"] += [[1, "prepare", TIMEOUT, 1020.0, 1030.0, False],
                        [2, "confirm", 500, 1020.0, 1020.1, False]]
    failed = judge(run, PHASES, CAPACITY).failed_targets
    assert any("time-outs" in f for f in failed) and any("5xx" in f for f in failed)


def test_latency_that_stays_high_after_the_overload_fails() -> None:
    run = _healthy()
    for t in run["transactions"]:
        if t[2] >= 1045:  # 5 s after the overload ended
            t[4] = t[2] + 0.2
    assert any("after the overload" in f for f in judge(run, PHASES, CAPACITY).failed_targets)


def test_each_target_is_judged_and_reported_on_its_own() -> None:
    run = _healthy()
    for r in run["requests"]:
        if r[2] == 503:
            r[4] = r[3] + 0.05  # slow refusals: that target alone is not met
    figures = judge(run, PHASES, CAPACITY)
    judged = verdicts(figures)
    assert len(judged) == 7
    assert [target for target, _, met in judged if not met] == ["p99 refusal <= 20 ms"]
    result = {"runs": [{"path": "overload", "mode": "open", "load": "r=200/s",
                        "overload": figures.as_dict() | {"targets": judged}}]}
    reported = [(name, met) for name, _, met in targets.judge(result)
                if name.startswith("overload")]
    assert reported == [(f"overload at r=200/s: {target}", met) for target, _, met in judged]
