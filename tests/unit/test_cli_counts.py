"""The one-line summaries of the commands count in good English ("1 message", "2 messages"),
and ``rms report`` drops Spark's start-up notices about the driver's address."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from history.retention import RetentionRequest, RetentionResult
from history.retention_cli import _summary
from rms.domain.counts import counted
from spark.cli import summary_line
from spark.session import forward_lines

CUTOFF = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.mark.parametrize(("count", "expected"), [
    (0, "0 messages"), (1, "1 message"), (2, "2 messages")])
def test_counted(count: int, expected: str) -> None:
    assert counted(count, "message") == expected


def test_counted_with_its_own_plural() -> None:
    assert counted(1, "batch", "batches") == "1 batch"
    assert counted(3, "batch", "batches") == "3 batches"


def test_the_report_summary_of_one_message() -> None:
    summary = {"totals": {"messages": 1}, "stuck": {"total": 0}, "dead": {"total": 0}}
    assert summary_line(summary, Path("/r")) == (
        "rms report: 1 message, 0 stuck, 0 dead; written to /r")


def test_the_retention_summary_of_one_of_everything() -> None:
    result = RetentionResult(cutoff=CUTOFF, messages=1, events=1, batches=1, orphan_events=1,
                             transactions=1, resumed=1, days=["2026-10-31"])
    line = _summary(RetentionRequest("postgresql://x/y", archive=Path("/a")), result)
    assert line == (
        "rms retention run: 1 message and 1 event finished before 2026-11-01T00:00:00Z removed "
        "in 1 batch, archived to /a (1 day); 1 of them finishes an interrupted run; 1 event of "
        "messages already gone; 1 finished transaction")
    dry = _summary(RetentionRequest("postgresql://x/y", dry_run=True), result)
    assert dry.startswith("rms retention run: dry run: 1 message and 1 event finished before ")


def test_the_report_drops_sparks_notices_about_the_drivers_address() -> None:
    lines = [b"26/11/27 21:00:01 WARN Utils: Your hostname, box resolves to a loopback address: "
             b"127.0.1.1; using 10.0.0.5 instead (on interface eth0)\n",
             b"26/11/27 21:00:01 WARN Utils: Set SPARK_LOCAL_IP if you need to bind to another "
             b"address\n",
             b"26/11/27 21:00:02 WARN Utils: Service 'SparkUI' could not bind on port 4040. "
             b"Attempting port 4041.\n",
             b"26/11/27 21:00:03 WARN Utils: Truncated the string representation of a plan\n"]
    kept: list[str] = []
    forward_lines(lines, kept.append)
    assert kept == [lines[3].decode()]
