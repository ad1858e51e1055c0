"""The fan-out bench path's pure parts: the consumer acks a record as exactly the apps its
``rms-awaiting`` names, the verification wants one ack per subscriber, and the targets compare
the path with the happy path and print the CPU per ack."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from bench import targets
from bench.consumer import Acker
from bench.verify import CONFIRMED, Stored, verify

APPS = ["fan1", "fan2", "fan3"]


@dataclass
class Record:
    headers: list[tuple[str, bytes]]


@pytest.fixture
def acker(monkeypatch: pytest.MonkeyPatch) -> Iterator[Acker]:
    monkeypatch.setenv("BENCH_SIGNING_SECRET", "s1,s2,s3")
    args = argparse.Namespace(skip_first="", route=[], ack_topic="acks", consumer_app=APPS)
    yield Acker(args, None, None)  # type: ignore[arg-type]


def test_a_record_is_acked_by_each_app_it_names_and_no_other(acker: Acker) -> None:
    record = Record([("rms-message-id", b"m1"), ("rms-awaiting", b"fan1,fan3")])
    assert acker._named(record) == [("fan1", "s1"), ("fan3", "s3")]


def test_a_record_naming_none_of_the_apps_is_acked_by_none(acker: Acker) -> None:
    assert acker._named(Record([("rms-awaiting", b"other")])) == []


def test_a_record_without_awaiting_is_acked_by_every_app(acker: Acker) -> None:
    assert [app for app, _ in acker._named(Record([]))] == APPS


def test_a_secret_per_app_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCH_SIGNING_SECRET", "s1")
    args = argparse.Namespace(skip_first="", route=[], ack_topic="acks", consumer_app=APPS)
    with pytest.raises(ValueError):
        Acker(args, None, None)  # type: ignore[arg-type]


def _stored(acked: int) -> Stored:
    return Stored("m1", "done", 1, 1.0, 2.0, 3.0, acked)


def test_a_fan_out_message_needs_one_ack_per_subscriber() -> None:
    expected = {"m1": CONFIRMED}
    assert verify(expected, {"m1": _stored(3)}, {"m1": []}, acks=3).passed
    short = verify(expected, {"m1": _stored(1)}, {"m1": []}, acks=3)
    assert short.samples == ["m1: 1 acked events (3 expected: one per subscriber, the last one "
                             "the transition to done)"]
    assert not verify(expected, {"m1": _stored(3)}, {"m1": []}).passed  # one subscriber


def _run(path: str, throughput: float, **extra: Any) -> dict[str, Any]:
    return {"path": path, "mode": "closed", "load": "c=32", "throughput": throughput,
            "consumers": 3 if path == "fanout" else 1, "transactions": 1000,
            "processes": {"rms-serve": {"cpu_seconds": 3.0}, "postgres": {"cpu_seconds": 1.5}},
            "stages": {}} | extra


def test_the_fan_out_targets_compare_with_the_happy_path_and_print_cpu_per_ack() -> None:
    result = {"runs": [_run("happy", 1000.0), _run("fanout", 790.0, acks=3000)]}
    judged = [j for j in targets.judge(result) if j[0].startswith("fan-out")]
    assert judged == [
        ("fan-out c=32 (3 consumer apps): tx/s >= 0.8 x happy's", "790 vs 1,000 tx/s (0.79)",
         False),
        ("fan-out c=32: CPU per ack", "rms serve 1.000 ms, PostgreSQL 0.500 ms over 3,000 acks",
         None)]
    result["runs"][1]["throughput"] = 800.0
    ratio = next(j for j in targets.judge(result) if j[0].startswith("fan-out c=32 (3"))
    assert ratio[1:] == ("800 vs 1,000 tx/s (0.80)", True)
