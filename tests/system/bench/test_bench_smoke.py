"""``rms bench`` at a tiny scale on its own stack: it runs every path, writes every stage and
the conditions, and its verification passes. Never asserts speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

STAGES = {
    "happy": {"prepare", "confirm", "record", "done"},
    "bare": {"prepare", "confirm", "record", "done"},
    "oneshot": {"prepare", "confirm", "record", "done"},
    "bulk": {"prepare", "confirm", "record", "done"},
    "transaction": {"prepare", "confirm", "record", "done"},
    "checkback": {"resolve", "record", "done"},
    "redelivery": {"resolve", "record", "done"},
    "delayed": {"resolve", "record", "done"},
    "ordered": {"prepare", "confirm", "record", "done"},
}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_tiny_bench_runs_every_path_and_verifies(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "rms.cli", "bench", "--transactions", "30", "--concurrency", "2",
         "--rate", "30", "--bulk-batch", "10", "--bulk-concurrency", "2",
         "--checkback-messages", "30", "--redelivery-messages", "30", "--out", str(out),
         "--paths", *STAGES],
        capture_output=True, text=True, timeout=540, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    runs = {(run["path"], run["mode"]): run for run in result["runs"]}
    assert {path for path, _ in runs} == set(STAGES)
    assert {("happy", "closed"), ("happy", "open"), ("bare", "closed"), ("bare", "open"),
            ("oneshot", "open")} <= set(runs)
    ordered = [run for run in result["runs"] if run["path"] == "ordered"]
    assert sorted(run["keys"] for run in ordered) == [4, 10_000]
    for (path, _), run in runs.items():
        assert set(run["stages"]) == STAGES[path], path
        assert run["verification"]["passed"], run["verification"]
        assert run["verification"]["checked"] > 0
        assert run["stages"]["done"]["count"] > 0, path
        assert "rms-serve" in run["processes"] and "postgres" in run["processes"]
    assert runs[("happy", "closed")]["rms_over_bare"] is not None
    for key in ("cores", "postgresql", "broker", "packages", "git_commit"):
        assert key in result["conditions"]
    assert result["conditions"]["postgresql"]["fsync"] == "on"
    assert "RMS/bare" in done.stdout and "conditions:" in done.stdout


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_pin_serve_runs_the_measured_servers_on_a_cpu_of_their_own(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "rms.cli", "bench", "--paths", "happy", "bare", "--pin-serve",
         "--transactions", "20", "--concurrency", "1", "--rate", "20", "--out", str(out)],
        capture_output=True, text=True, timeout=360, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    conditions = json.loads(out.read_text())["conditions"]
    serve = conditions["serve_cpus"]
    affinity = conditions["affinity"]
    assert affinity["rms-serve"] == serve and affinity["bare"] == serve, affinity
    for other in ("postgres", "kafka", "consumer", "callback"):
        assert not set(affinity[other]) & set(serve), (other, affinity)
    assert f"measured servers pinned to CPU {serve}" in done.stdout
