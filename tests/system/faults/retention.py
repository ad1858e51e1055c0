"""Retention under load: ``rms retention run`` with a Parquet archive, run again and again while
the scenario's load goes on, sometimes killed with SIGKILL mid-run (the next run finishes the
journaled batch first), and once more to completion before the final snapshot; and the
archive read back for the checker (:class:`~tests.system.faults.history.Final` ``archived``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.system.faults.cluster import RmsProcess, Stack
from tests.system.faults.history import FinalMessage, History, StoredEvent

OLDER_THAN = "2s"  # finished messages go two seconds after done_at / deleted_at
BATCH_SIZE = "25"  # small batches: a kill lands between and inside them
EVERY = (2.0, 6.0)  # seconds between two runs
KILL_SHARE = 0.35
KILL_AFTER = (0.2, 2.0)
RUN_SECONDS = 120.0
FINISH_ATTEMPTS = 3
FINISH_SECONDS = FINISH_ATTEMPTS * (RUN_SECONDS + 15.0)  # the final runs, each bounded


@dataclass
class Retention:
    """The scenario's retention job; ``history.features`` counts runs, kills and failures."""

    stack: Stack
    history: History
    rng: random.Random
    database_url: str
    runs: int = 0
    log_lines: list[str] = field(default_factory=list)

    @property
    def archive(self) -> Path:
        return self.stack.infra.base / "archive"

    async def loop(self, stop_at: Callable[[], float]) -> None:
        """Runs (some killed) until the load's stop, which the scenario may push back."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.rng.uniform(*EVERY))
            if loop.time() >= stop_at():
                return
            await self.once(kill=self.rng.random() < KILL_SHARE)

    async def once(self, *, kill: bool = False) -> int | None:
        """One run; its exit code (None: killed)."""
        self.runs += 1
        process = RmsProcess(
            f"retention-{self.runs}",
            ["retention", "run", "--older-than", OLDER_THAN, "--archive", str(self.archive),
             "--batch-size", BATCH_SIZE, "--database-url", self.database_url],
            self.stack.serve.env, self.stack.base / "retention.log")
        process.start()
        self.history.features["retention-run"] += 1
        try:
            if kill:
                await asyncio.sleep(self.rng.uniform(*KILL_AFTER))
                if process.alive:
                    process.kill()
                    self.history.features["retention-killed"] += 1
                    return None
            code = await _exit_code(process)
        except asyncio.CancelledError:  # the scenario ended: no run outlives it
            await asyncio.to_thread(process.kill)
            raise
        if code != 0:
            self.history.features["retention-failed"] += 1
        return code

    async def finish(self, attempts: int = FINISH_ATTEMPTS) -> bool:
        """Runs to completion (resuming a killed run's batch): True once one exits 0."""
        for _ in range(attempts):
            if await self.once() == 0:
                return True
        self.history.features["retention-final-failed"] += 1
        return False


async def _exit_code(process: RmsProcess) -> int:
    """Waits (bounded) for the run to end; one still running then is killed."""
    assert process.process is not None
    with contextlib.suppress(subprocess.TimeoutExpired):
        return await asyncio.to_thread(process.process.wait, RUN_SECONDS)
    process.kill()
    return int(process.process.wait(10))


# ---- the archive, read back -------------------------------------------------------------


def read_archive(archive: Path, apps: Iterable[str]
                 ) -> tuple[list[FinalMessage], list[StoredEvent]]:
    """The archived messages of ``apps`` (every row, so a message archived twice shows twice)
    and the archived events of messages of theirs."""
    import pyarrow.parquet as pq

    wanted = set(apps)
    messages = [_message(row) for path in sorted(archive.glob("day=*/messages/part-*.parquet"))
                for row in pq.read_table(path).to_pylist() if row["app"] in wanted]
    ids = {m.message_id for m in messages}
    events = [_event(row) for path in sorted(archive.glob("day=*/events/part-*.parquet"))
              for row in pq.read_table(path).to_pylist() if row["message_id"] in ids]
    return messages, events


def _epoch(value: datetime | None) -> float | None:
    if value is None:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()


def _message(row: dict[str, Any]) -> FinalMessage:
    return FinalMessage(row["message_id"], row["app"], row["topic"], row["state"],
                        bool(row["dead"]), row["dead_reason"], row["max_deliveries"],
                        row["delivery_count"], None, row["key"], bool(row.get("ordered")),
                        row.get("confirm_seq"), _epoch(row["deliver_after"]),
                        row.get("transaction_id"), archived=True,
                        subscribers=_subscribers(row.get("subscribers")),
                        acks=_ack_times(row.get("acks")))


def _subscribers(value: Any) -> tuple[str, ...] | None:
    """The archived ``subscribers`` (a JSON array's text, or a list; None: single-ack rule)."""
    names = json.loads(value) if isinstance(value, str) else value
    return None if names is None else tuple(str(v) for v in names)


def _ack_times(value: Any) -> dict[str, float]:
    """The archived ``acks`` (JSON text or a mapping) as {consumer: epoch seconds}."""
    acks = json.loads(value) if isinstance(value, str) else dict(value or {})
    return {str(k): datetime.fromisoformat(str(v["at"])).timestamp() for k, v in acks.items()}


def _event(row: dict[str, Any]) -> StoredEvent:
    detail = row["detail"]
    return StoredEvent(row["message_id"], row["event"], row["actor"],
                       json.loads(detail) if isinstance(detail, str) else dict(detail or {}),
                       int(row["id"]), _epoch(row["at"]) or 0.0)
