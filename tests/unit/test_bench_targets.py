"""The cost targets judged on made-up runs: each target is met, missed, or not measured."""

from __future__ import annotations

from typing import Any

from bench.targets import judge


def _run(path: str, mode: str, load: str, **fields: Any) -> dict[str, Any]:
    return {"path": path, "mode": mode, "load": load, "transactions": 1000, "messages": 1000,
            "seconds": 5.0, "throughput": 200.0, "stages": {}, "processes": {}} | fields


def _verdicts(*runs: dict[str, Any]) -> dict[str, bool | None]:
    return {name: met for name, _, met in judge({"runs": list(runs)})}


def _one(verdicts: dict[str, bool | None], starts: str) -> bool | None:
    (met,) = [m for name, m in verdicts.items() if name.startswith(starts)]
    return met


def test_the_happy_ratio_and_the_serve_cpu_per_transaction() -> None:
    verdicts = _verdicts(
        _run("happy", "closed", "c=1", rms_over_bare=0.96),
        _run("happy", "closed", "c=32", rms_over_bare=0.90,
             processes={"rms-serve": {"cpu_seconds": 0.6}}))
    assert _one(verdicts, "happy c=1:") is True
    assert _one(verdicts, "happy c=32:") is False
    assert _one(verdicts, "rms serve CPU per full transaction at c=32") is True  # 0.6 ms


def test_the_open_loop_p99_is_judged_against_bare_in_the_same_run() -> None:
    def stages(prepare: float, confirm: float) -> dict[str, Any]:
        return {"prepare": {"p99_ms": prepare}, "confirm": {"p99_ms": confirm}}

    met = _verdicts(_run("happy", "open", "r=600/s", stages=stages(30, 60)),
                    _run("bare", "open", "r=600/s", stages=stages(20, 40)))
    missed = _verdicts(_run("happy", "open", "r=600/s", stages=stages(31, 60)),
                       _run("bare", "open", "r=600/s", stages=stages(20, 40)))
    assert _one(met, "happy r=600/s") is True
    assert _one(missed, "happy r=600/s") is False


def test_transactions_bulk_and_workers() -> None:
    verdicts = _verdicts(
        _run("happy", "closed", "c=32", throughput=500.0),
        _run("transaction", "closed", "c=32", messages=2400, seconds=5.0),  # 480 messages/s
        _run("bulk", "closed", "c=4", messages=10_000,
             processes={"rms-serve": {"cpu_seconds": 0.5}, "postgres": {"cpu_seconds": 0.4},
                        "kafka": {"cpu_seconds": 0.3}}),  # 0.12 ms per message
        _run("checkback", "workers", "w=1", messages=10_000, throughput=6500.0,
             processes={"confirm-worker": {"cpu_seconds": 1.1}}),  # 0.11 ms
        _run("redelivery", "workers", "w=1", messages=10_000, throughput=11_000.0,
             processes={"postgres": {"cpu_seconds": 0.6}}))  # 0.06 ms
    assert _one(verdicts, "transactions") is False
    assert _one(verdicts, "bulk") is True
    assert _one(verdicts, "check-back") is False
    assert _one(verdicts, "redelivery") is True


def test_what_a_run_did_not_measure_is_neither_met_nor_missed() -> None:
    verdicts = _verdicts()
    assert set(verdicts.values()) == {None}


def test_the_serve_cpu_is_counted_per_completed_transaction_not_per_refused_attempt() -> None:
    refused_half = _run("happy", "closed", "c=32", transactions=2000, completed=1000,
                        processes={"rms-serve": {"cpu_seconds": 0.8}})
    verdicts = _verdicts(refused_half)
    assert _one(verdicts, "rms serve CPU per full transaction at c=32") is False  # 0.8 ms
