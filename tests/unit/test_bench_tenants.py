"""The two-tenant path's judgement, on made-up load-generator records: the calm tenant's share
of 2xx answers and its p99 beside the flood against its p99 alone, each target on its own."""

from __future__ import annotations

from typing import Any

from bench import targets
from bench.loadgen import CONFIRMED, REFUSED
from bench.tenants import Calm, flood_problems, verdicts


def _calm(count: int, refused: int, seconds_each: float) -> dict[str, Any]:
    transactions: list[list[Any]] = [[n, CONFIRMED, float(n), n + seconds_each,
                                      n + 2 * seconds_each] for n in range(count - refused)]
    transactions += [[n, REFUSED, float(n), None, n + 0.001]
                     for n in range(count - refused, count)]
    return {"transactions": transactions}


def test_a_calm_tenant_that_keeps_its_answers_and_latency_meets_both_targets() -> None:
    alone, flooded = Calm.of(_calm(200, 0, 0.01)), Calm.of(_calm(200, 4, 0.014))
    assert (alone.p99_ms, flooded.share) == (20.0, 0.98)
    assert [met for _, _, met in verdicts(alone, flooded)] == [True, True]


def test_refusals_and_slow_answers_of_the_calm_tenant_fail_their_own_target() -> None:
    alone = Calm.of(_calm(200, 0, 0.01))
    refused, slow = Calm.of(_calm(200, 20, 0.01)), Calm.of(_calm(200, 0, 0.02))
    assert [met for _, _, met in verdicts(alone, refused)] == [False, True]
    assert [met for _, _, met in verdicts(alone, slow)] == [True, False]


def test_the_targets_are_reported_with_the_run() -> None:
    judged = verdicts(Calm.of(_calm(100, 0, 0.01)), Calm.of(_calm(100, 50, 0.01)))
    result = {"runs": [{"path": "tenants", "mode": "open", "load": "r=100",
                        "tenants": {"targets": judged}}]}
    reported = [(name, met) for name, _, met in targets.judge(result)
                if name.startswith("two tenants")]
    assert reported == [(f"two tenants at r=100: {target}", met) for target, _, met in judged]


def test_a_flood_that_met_errors_or_never_reached_the_server_fails_the_run() -> None:
    flood = {"clients": 128, "transactions": 0, "answered": 0, "refusals": 0, "errors": 0,
             "error_samples": []}
    assert flood_problems(flood) == [
        "the flood was no flood: 0 answered and 0 refused from 128 clients"]
    rejected = flood | {"transactions": 60_000, "errors": 60_000,
                        "error_samples": ["/v1/messages -> 422 ..."]}
    assert flood_problems(rejected)[0].startswith("the flood met 60000 errors")
    assert flood_problems(flood | {"answered": 5_000, "refusals": 900}) == []
