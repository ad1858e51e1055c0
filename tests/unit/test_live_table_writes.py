"""Only the store writes to the live tables: no ``INSERT``, ``UPDATE`` or ``DELETE`` on them in
Python code outside ``rms/store`` (and the schema's migrations). An import contract
(``store-vocabulary`` in pyproject.toml) keeps the rest off the store's statement modules;
this test catches SQL written by hand anywhere else."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIVE_TABLES = ("messages", "message_events", "transactions", "apps", "ordering_keys")
WRITE = re.compile(
    r"\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(?:" + "|".join(LIVE_TABLES) + r")\b",
    re.IGNORECASE)
STORE = ("rms/store/", "rms/migrations/", "tests/")
# the benchmark's own SQL, each file on purpose outside the store
BENCH = {
    "bench/baseline.py": "the hand-written statements the store is measured against",
    "bench/workerpaths.py": "makes seeded rows due, so a worker benchmark has work",
    "bench/retention_layouts.py": "seeds the scratch databases retention is measured on",
    "bench/seed.py": "seeds millions of finished messages for the full-database path",
}


def _python_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.split()
    return [name for name in listed if not name.startswith(STORE)]


def writers() -> dict[str, list[str]]:
    """Every file outside the store with a write to a live table, and the writes."""
    found: dict[str, list[str]] = {}
    for name in _python_files():
        hits = WRITE.findall((ROOT / name).read_text(encoding="utf-8"))
        if hits:
            found[name] = hits
    return found


def test_nothing_outside_the_store_writes_to_the_live_tables() -> None:
    outside = {name: hits for name, hits in writers().items() if name not in BENCH}
    assert outside == {}


def test_each_benchmark_exception_still_writes() -> None:
    """An exception that no longer applies is removed, not kept as a hole."""
    assert set(writers()) >= set(BENCH)


def test_the_pattern_sees_a_write() -> None:
    assert WRITE.search("delete from message_events AS e WHERE")
    assert WRITE.search("UPDATE\n  messages SET state = 'done'")
    assert not WRITE.search("SELECT * FROM messages")
