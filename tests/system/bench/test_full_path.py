"""``rms bench --paths full`` at a tiny scale on its own stack: the happy, check-back and
redelivery paths run on the empty database and again on the seeded one while ``rms retention
run`` removes the seeded messages past their age; every run verifies, each full-database row
carries its comparison, and the seeding, the plans and retention's rate are printed. Never
asserts speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_tiny_full_path_runs_and_verifies(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "rms.cli", "bench", "--paths", "full", "--transactions", "30",
         "--concurrency", "2", "--checkback-messages", "30", "--redelivery-messages", "30",
         "--seed-messages", "3000", "--out", str(out)],
        capture_output=True, text=True, timeout=540, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    runs = json.loads(out.read_text())["runs"]
    assert [run["load"] for run in runs] == [
        "happy c=2 empty", "checkback w=1 empty", "redelivery w=1 empty",
        "happy c=2 full", "checkback w=1 full", "redelivery w=1 full"]
    for run in runs:
        assert run["path"] == "full" and run["verification"]["passed"], run["verification"]
        assert run["verification"]["checked"] > 0 and run["errors"] == 0
    for empty, full in zip(runs[:3], runs[3:], strict=True):
        compared = full["full"]
        assert compared["empty_throughput"] == empty["throughput"] > 0
        assert compared["throughput_share"] == round(full["throughput"] / empty["throughput"], 3)
        assert compared["seed"]["messages"] == 3000
        assert {p["name"] for p in compared["plans"]} >= {"prepare", "redelivery-claim"}
        assert compared["autovacuum"] == "on"
    retention = runs[3]["full"]["retention"]
    assert retention["duty_cycle"] == 0.25  # the command's default pace
    # past the age: five of the six months (2,500 messages); removed while the load ran
    assert 0 < retention["removed"] <= 2501
    assert retention["per_s"] == pytest.approx(retention["removed"] / retention["seconds"],
                                               rel=0.01)
    assert "seeded 3,000 done messages and 12,000 events in " in done.stdout
    assert "== retention-delete-events: indexed" in done.stdout
    assert "full database (3,000 done messages seeded" in done.stdout
    assert "retention removed " in done.stdout and "a day at this pace vs the sizing's" in done.stdout
