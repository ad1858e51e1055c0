"""The overload path's judgement, on made-up load-generator records: each target fails when
its condition is broken, and a run that meets them all passes."""

from __future__ import annotations

import math
import os
import time
from typing import Any

from bench import targets
from bench.loadgen import CONFIRMED, REFUSED, TIMEOUT
from bench.overload import (
    LimitWatch,
    Window,
    bucket_percentile,
    judge,
    lag_buckets,
    loop_schedstat,
    verdicts,
)

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


def test_where_a_refusals_time_goes_is_reported_beside_it() -> None:
    run = _healthy()
    for r in run["requests"]:
        if r[2] == 503:  # 30 ms waiting for a pool connection, then answered in 2 ms
            r[4] = r[3] + 0.032
            r.append(r[3] + 0.030)
    run["loop_lag"] = [[START + 10 + i / 100, 0.001 * (i % 10)] for i in range(3000)]
    run["loop_lag"] += [[START + 45.0, 5.0]]  # after the overload: not counted
    figures = judge(run, PHASES, CAPACITY)
    assert figures.refusal_p99_ms == 32.0 and figures.refusal_sent_p99_ms == 2.0
    assert figures.loadgen_lag_p99_ms == 9.0


def test_requests_without_an_answer_have_no_sent_time() -> None:
    run = _healthy()
    run["requests"].append([1, "prepare", TIMEOUT, 1020.0, 1030.0, False, None])
    assert judge(run, PHASES, CAPACITY).refusal_sent_p99_ms is None  # none recorded it


def test_the_servers_lag_is_read_from_its_histogram_around_the_window() -> None:
    text = b"\n".join([
        b"# HELP rms_event_loop_lag_seconds ...",
        b'rms_event_loop_lag_seconds_bucket{le="0.001"} 90.0',
        b'rms_event_loop_lag_seconds_bucket{le="0.02"} 99.0',
        b'rms_event_loop_lag_seconds_bucket{le="0.04"} 100.0',
        b'rms_event_loop_lag_seconds_bucket{le="+Inf"} 100.0',
        b"rms_event_loop_lag_seconds_count 100.0",
        b'rms_event_loop_lag_seconds_bucket{le="x"} 1.0',  # not a bucket: left out
        b'rms_event_loop_lag_seconds_bucket{le="0.08"} many',
    ])
    buckets = lag_buckets(text)
    assert buckets == {0.001: 90.0, 0.02: 99.0, 0.04: 100.0, math.inf: 100.0}
    assert bucket_percentile(buckets, 99) == 20.0 and bucket_percentile(buckets, 50) == 1.0
    assert bucket_percentile({}, 99) is None and bucket_percentile({math.inf: 0.0}, 99) is None
    watch = LimitWatch("http://unused")
    earlier = {0.001: 1000.0, 0.02: 1000.0, 0.04: 1000.0, math.inf: 1000.0}
    watch.lag += [(5.0, earlier), (15.0, {le: count + 1000.0 for le, count in buckets.items()})]
    assert watch.lag_during(Window(10.0, 20.0)) == 20.0  # only what the window added
    assert watch.lag_during(Window(0.0, 20.0)) is None  # no sample before it


def test_the_servers_time_on_and_waiting_for_a_cpu_is_its_share_of_the_window() -> None:
    watch = LimitWatch("http://unused", pid=1)
    watch.sched += [(5.0, 1.0, 0.5), (12.0, 5.5, 3.0), (15.0, 7.0, 4.5)]
    assert watch.loop_cpu_during(Window(10.0, 20.0)) == (0.6, 0.4)  # from 5 s to 15 s
    assert watch.loop_cpu_during(Window(0.0, 20.0)) is None


def test_the_schedstat_of_a_running_process_is_read_and_a_missing_one_is_none() -> None:
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:  # some CPU time of this thread to see
        pass
    on, waiting = loop_schedstat(os.getpid()) or (0.0, -1.0)
    assert on >= 0.05 and waiting >= 0.0
    assert loop_schedstat(2**22 + 1) is None  # above the kernel's largest pid
