"""The ``full`` path: RMS on a database that has been in production for months, with retention
working beside the load, against the same paths on the empty database of the same run.

1. On the bench's database as it is (empty but for the runs before): the happy path at the
   largest ``--concurrency`` (32 by default), then the check-back and redelivery worker paths.
2. ``--seed-messages`` done messages with their four events each are added over six months
   (:mod:`bench.seed`), and the query plans of the hot statements printed (:mod:`bench.plans`).
3. ``rms retention run --archive DIR`` starts, as cron starts it: the command line with its
   default age (30 days) and its default pace (``--retention-duty-cycle`` sets another duty
   cycle); autovacuum is on, as PostgreSQL ships.
4. The three paths run again while retention removes the seeded messages past their age.
   Retention's rate is the seeded messages gone per second over that window.

Each full-database row carries its empty-database partner's figures and the ratios the
targets are set on: happy throughput >= 0.9 of empty and confirm p99 <= 1.5x, check-back and
redelivery >= 0.8 of empty. The path changes the database (millions of rows): it runs last.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from bench import plans as planner
from bench.paths import Load, run_load
from bench.seed import seed
from bench.stack import Stack
from bench.workerpaths import WorkerLoad, run_worker_path
from history.pacing import Pace

HAPPY_SHARE, HAPPY_P99_FACTOR, WORKER_SHARE = 0.9, 1.5, 0.8
SIZING_MESSAGES_A_DAY = 10_000_000  # the daily volume of docs/operations/sizing.md, "Sizing"
RETENTION = "retention"
# the seeded ids are 'seed-<n>': a range of the primary key, counted without a table scan
_SEEDED_LEFT = ("SELECT count(*) FROM messages "
                "WHERE message_id >= 'seed-' AND message_id < 'seed.'")


@dataclass(frozen=True)
class FullLoad:
    concurrency: int
    duration: float
    transactions: int | None
    checkback: WorkerLoad
    redelivery: WorkerLoad
    seed_messages: int
    retention_duty: float | None = None  # None: the command's default pace


def _paths(stack: Stack, load: FullLoad, run_id: str) -> list[dict[str, Any]]:
    happy = Load("happy", "closed", concurrency=load.concurrency, duration=load.duration,
                 transactions=load.transactions)
    return [run_load(stack, happy, stack.api_url, f"{run_id}-happy"),
            run_worker_path(stack, load.checkback, f"{run_id}-checkback"),
            run_worker_path(stack, load.redelivery, f"{run_id}-redelivery")]


async def _scalar(dsn: str, sql: str) -> Any:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(sql)
    finally:
        await conn.close()


def _start_retention(stack: Stack, duty: float | None) -> subprocess.Popen[bytes]:
    """The cron job's command line, with the defaults an operator gets (or ``duty``)."""
    pace = [] if duty is None else ["--duty-cycle", f"{duty:g}"]
    process = stack.spawn(RETENTION, ["-m", "rms.cli", "retention", "run",
                                      "--archive", str(stack.work / "archive"), *pace])
    stack.processes.pop(RETENTION)  # it may finish before the load does: not a failure
    return process


def _stop_retention(stack: Stack, process: subprocess.Popen[bytes]) -> int | None:
    """Stops a run still working (a batch's delete is one transaction: nothing half done);
    returns its exit code if it had ended by itself."""
    code = process.poll()
    stack.processes[RETENTION] = process
    stack.stop_process(RETENTION)
    return code


def _p99(run: dict[str, Any], stage: str) -> float | None:
    figures = run["stages"].get(stage) or {}
    value = figures.get("p99_ms")
    return float(value) if value is not None else None


def _ratio(full: float | None, empty: float | None) -> float | None:
    return round(full / empty, 3) if full is not None and empty else None


def _compare(full: dict[str, Any], empty: dict[str, Any]) -> dict[str, Any]:
    """The full-database row's figures against its empty-database partner and its target."""
    happy = full["path"] == "happy"
    share = _ratio(full["throughput"], empty["throughput"])
    stage = "confirm" if happy else "resolve"
    p99 = _ratio(_p99(full, stage), _p99(empty, stage))
    needed = HAPPY_SHARE if happy else WORKER_SHARE
    met = share is not None and share >= needed and (
        not happy or (p99 is not None and p99 <= HAPPY_P99_FACTOR))
    return {"empty_throughput": empty["throughput"], "throughput_share": share,
            "p99_stage": stage, "empty_p99_ms": _p99(empty, stage), "p99_ms": _p99(full, stage),
            "p99_factor": p99, "target": f">= {needed} of empty" + (
                f", {stage} p99 <= {HAPPY_P99_FACTOR}x" if happy else ""), "met": met}


def run_full(stack: Stack, load: FullLoad, run_id: str) -> list[dict[str, Any]]:
    """Every row of the path: the empty-database runs, then the full-database ones (each with
    ``full``: its comparison, the seeding, the plans and retention's rate)."""
    empty = _paths(stack, load, f"{run_id}-empty")
    seeded = asyncio.run(seed(stack.dsn, load.seed_messages))
    print(f"rms bench: full: {seeded.render()}", flush=True)
    plans = asyncio.run(planner.explain(stack.dsn))
    print(planner.render(plans), flush=True)
    autovacuum = asyncio.run(_scalar(stack.dsn, "SHOW autovacuum"))
    retention = _start_retention(stack, load.retention_duty)
    left, started = asyncio.run(_scalar(stack.dsn, _SEEDED_LEFT)), time.monotonic()
    try:
        full = _paths(stack, load, f"{run_id}-full")
    finally:
        seconds = time.monotonic() - started
        removed = left - asyncio.run(_scalar(stack.dsn, _SEEDED_LEFT))
        ended = _stop_retention(stack, retention)
    shared = {
        "seed": {"messages": seeded.messages, "seconds": round(seeded.seconds, 1),
                 "sizes": [vars(size) for size in seeded.sizes]},
        "plans": [{"name": p.name, "seq_scan": p.seq_scan, "execution_ms": p.execution_ms,
                   "plan": p.lines} for p in plans],
        "autovacuum": autovacuum,
        "retention": {"removed": removed, "seconds": round(seconds, 3),
                      "per_s": round(removed / seconds, 1) if seconds else 0.0,
                      "per_day": round(removed / seconds * 86_400) if seconds else 0,
                      "duty_cycle": load.retention_duty or Pace().duty,
                      "sizing_per_day": SIZING_MESSAGES_A_DAY,
                      "ended_by_itself": ended is not None, "exit_code": ended},
    }
    for row, partner in zip(full, empty, strict=True):
        row["full"] = _compare(row, partner) | shared
    for kind, rows in (("empty", empty), ("full", full)):
        for row in rows:  # one path in the table, apart from the paths on the empty database
            row["path"], row["load"] = "full", f"{row['path']} {row['load']} {kind}"
    return empty + full


def render(runs: list[dict[str, Any]]) -> list[str]:
    """The printed comparison of the full-database rows."""
    rows = [run for run in runs if run.get("full")]
    if not rows:
        return []
    first = rows[0]["full"]
    retention = first["retention"]
    lines = ["", f"full database ({first['seed']['messages']:,} done messages seeded in "
                 f"{first['seed']['seconds']:.0f} s; autovacuum {first['autovacuum']}; "
                 f"rms retention run at duty cycle {retention['duty_cycle']:g} beside the load):"]
    for run in rows:
        f = run["full"]
        lines.append(
            f"  {run['load']:<22} {run['throughput']:,.0f} vs empty {f['empty_throughput']:,.0f}"
            f" {run['unit']} ({_cell(f['throughput_share'])}); {f['p99_stage']} p99 "
            f"{_cell(f['p99_ms'])} vs {_cell(f['empty_p99_ms'])} ms ({_cell(f['p99_factor'])}x)"
            f"; target {f['target']}: {'met' if f['met'] else 'NOT MET'}")
    lines.append(f"  retention removed {retention['removed']:,} messages in "
                 f"{retention['seconds']:.0f} s: {retention['per_s']:,.0f}/s, "
                 f"{retention['per_day']:,} a day at this pace vs the sizing's "
                 f"{retention['sizing_per_day']:,} a day"
                 + ("; it finished before the load did" if retention["ended_by_itself"] else ""))
    seq = [p["name"] for p in first["plans"] if p["seq_scan"]]
    lines.append("  query plans: " + (f"SEQ SCAN in {', '.join(seq)}" if seq else
                                      "every hot statement uses an index"))
    return lines


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}" if value < 100 else f"{value:,.0f}"
