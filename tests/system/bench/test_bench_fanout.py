"""``rms bench --paths happy fanout`` at a tiny scale on its own stack: the fan-out path runs,
every confirmed message is ``done`` with one ack per consumer app (the verification), and the
report prints its comparison with the happy path and its CPU per ack. Never asserts speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_tiny_fan_out_run_verifies_three_acks_per_message(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "rms.cli", "bench", "--transactions", "30", "--concurrency", "2",
         "--rate", "--paths", "happy", "fanout", "--out", str(out)],
        capture_output=True, text=True, timeout=360, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    runs = {run["path"]: run for run in json.loads(out.read_text())["runs"]}
    assert set(runs) == {"happy", "fanout"}
    fanout = runs["fanout"]
    assert fanout["consumers"] == 3 and fanout["load"] == "c=2"
    assert fanout["verification"]["passed"] and fanout["verification"]["checked"] == 30
    assert set(fanout["stages"]) == {"prepare", "confirm", "record", "done"}
    assert fanout["stages"]["done"]["count"] > 0
    assert fanout["acks"] == 3 * fanout["stages"]["done"]["count"]
    assert {"rms-serve", "postgres", "fanout-consumer"} <= set(fanout["processes"])
    assert "fan-out c=2 (3 consumer apps): tx/s >= 0.8 x happy's" in done.stdout
    assert "fan-out c=2: CPU per ack: rms serve" in done.stdout
