"""The report benchmark's synthetic history is an ``rms export`` of today's schema: every
column of ``history.tables`` in the written Parquet, so a new column cannot leave the
generator behind."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from bench.history_gen import generate
from history.tables import EVENT_COLUMNS, MESSAGE_COLUMNS


def test_a_small_history_has_every_exported_column(tmp_path: Path) -> None:
    counts = generate(tmp_path / "history", 2_000, hours=2, chunk=700)
    messages = pq.read_table(tmp_path / "history" / "messages")
    events = pq.read_table(tmp_path / "history" / "events")
    assert messages.column_names == [name for name, _ in MESSAGE_COLUMNS]
    assert events.column_names == [name for name, _ in EVENT_COLUMNS]
    assert (messages.num_rows, events.num_rows) == (counts.messages, counts.events)
    assert counts.messages == 2_000 and counts.events > 2_000
