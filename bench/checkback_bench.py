"""Check-back throughput: messages resolved per second by 1 and by 3 ``rms confirm-worker``
processes against a local callback server that answers ``committed`` at once.

Method (reproducible; everything runs on this machine):

1. Start an embedded PostgreSQL and Kafka-protocol broker, migrate, register one app.
2. Start the callback server in its own process (uvicorn + uvloop + httptools).
3. For each worker count: prepare N messages (check_after far in the future, so none is due),
   start the workers and wait until each logs ``worker.started``; then make all N due in one
   ``UPDATE`` (time zero) and poll until none is pending-send. The rate is N divided by the
   time from that UPDATE to the last ``confirmed_at``, both read from the database clock.
   Every resolution includes the signed HTTP call, the guarded confirm with its events and
   the Kafka publish with its ``published`` event: the full check-back path.

Usage: ``.venv/bin/python bench/checkback_bench.py --messages 20000 --workers 1 3``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.config import Settings
from rms.domain.ids import new_message_id
from rms.domain.models import NewMessage
from rms.embedded import EmbeddedKafka, EmbeddedPostgres, free_port, wait_for_port
from rms.store.apps import AppSpec, AppStore
from rms.store.database import create_engine
from rms.store.messages import MessageStore
from rms.store.migrate import upgrade

ADMIN_TOKEN = "bench-admin-token"
APP = "bench"
GATE_SECONDS = 86_400.0
ANSWER = b'{"status":"committed"}'


# ---- the callback server (runs in its own process) ----------------------------------------

async def committed(scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                    send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    """Answer every check-back ``committed`` (signature not verified: the producer's cost is
    not what this bench measures)."""
    if scope["type"] != "http":
        return
    more = True
    while more:
        more = bool((await receive()).get("more_body"))
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(ANSWER)).encode())]})
    await send({"type": "http.response.body", "body": ANSWER})


def serve_callback(port: int) -> None:
    import uvicorn

    uvicorn.run(committed, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                loop="uvloop", http="httptools", lifespan="off", ws="none", backlog=4096)


# ---- the stack ----------------------------------------------------------------------------

@dataclass
class Stack:
    root: Path
    postgres: EmbeddedPostgres
    kafka: EmbeddedKafka
    callback_port: int
    callback: subprocess.Popen[bytes] | None = None

    @property
    def database_url(self) -> str:
        return self.postgres.url("rms")

    def settings(self) -> Settings:
        return Settings(database_url=self.database_url, admin_token=ADMIN_TOKEN,
                        kafka_bootstrap_servers=self.kafka.bootstrap_servers)

    def start(self) -> None:
        self.postgres.start()
        self.kafka.start()
        self.postgres.create_database("rms")
        upgrade(self.database_url)
        self.callback = subprocess.Popen(
            [sys.executable, __file__, "--serve-callback", str(self.callback_port)])
        wait_for_port("127.0.0.1", self.callback_port, 30)

    def stop(self) -> None:
        if self.callback is not None:
            self.callback.terminate()
            self.callback.wait(10)
        self.kafka.stop()
        self.postgres.stop("immediate")

    def worker_env(self, args: argparse.Namespace) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")}
        return env | {
            "RMS_DATABASE_URL": self.database_url,
            "RMS_KAFKA_BOOTSTRAP_SERVERS": self.kafka.bootstrap_servers,
            "RMS_ADMIN_TOKEN": ADMIN_TOKEN,
            "RMS_ALLOW_PRIVATE_CALLBACKS": "true",
            "RMS_WORKER_INTERVAL_SECONDS": "0.2",
            "RMS_WORKER_BATCH_SIZE": str(args.batch_size),
            "RMS_WORKER_CONCURRENCY": str(args.concurrency),
            "RMS_LOG_LEVEL": "INFO",  # production's default: one log line per check
            "RMS_LOG_JSON": "true",
        }


# ---- one measured run ---------------------------------------------------------------------

async def prepare(engine: AsyncEngine, count: int, check_url: str, topic: str) -> None:
    store = MessageStore(engine)
    settings_policy = Settings(dev_mode=True).policy
    for start in range(0, count, 1000):
        drafts = [NewMessage(new_message_id(), topic, None, {"n": n}, {}, check_url, GATE_SECONDS,
                             settings_policy.max_checks, settings_policy.ack_timeout_seconds,
                             settings_policy.max_deliveries)
                  for n in range(start, min(count, start + 1000))]
        await store.prepare_batch(APP, drafts)


def start_workers(stack: Stack, args: argparse.Namespace, count: int, run: int
                  ) -> list[subprocess.Popen[bytes]]:
    workers = []
    for n in range(count):
        log = (stack.root / f"run{run}-worker{n}.log").open("wb")
        workers.append(subprocess.Popen(
            [sys.executable, "-m", "rms.cli", "confirm-worker"], env=stack.worker_env(args),
            stdout=log, stderr=subprocess.STDOUT))
    return workers


def started(log: Path) -> bool:
    return log.exists() and b'"worker.started"' in log.read_bytes()


async def wait_started(stack: Stack, run: int, count: int) -> None:
    """Until every worker logged ``worker.started`` (connected, scheduler running)."""
    logs = [stack.root / f"run{run}-worker{n}.log" for n in range(count)]
    deadline = time.monotonic() + 60
    while not all(started(log) for log in logs):
        if time.monotonic() > deadline:
            raise RuntimeError(f"workers did not start; see {stack.root}")
        await asyncio.sleep(0.1)


async def measure(stack: Stack, engine: AsyncEngine, args: argparse.Namespace, count: int,
                  run: int) -> dict[str, float]:
    topic = f"bench.run{run}"
    load_before = os.getloadavg()[0]
    await prepare(engine, args.messages, f"http://127.0.0.1:{stack.callback_port}/check", topic)
    workers = start_workers(stack, args, count, run)
    try:
        await wait_started(stack, run, count)
        async with engine.begin() as conn:
            opened = (await conn.execute(text(
                "UPDATE messages SET next_check_at = now(), check_after_seconds = 1 "
                "WHERE topic = :t AND state = 'pending-send' RETURNING now()"),
                {"t": topic})).scalar()
        started = time.monotonic()
        await _drained(engine, topic)
        wall = time.monotonic() - started
        async with engine.connect() as conn:
            last = (await conn.execute(text(
                "SELECT max(confirmed_at) FROM messages WHERE topic = :t"), {"t": topic})).scalar()
            retried = (await conn.execute(text(
                "SELECT count(*) FROM messages WHERE topic = :t AND check_count > 1"),
                {"t": topic})).scalar()
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.wait(30)
    assert last is not None and opened is not None
    seconds = (last - opened).total_seconds()
    return {"workers": count, "messages": args.messages, "seconds": seconds,
            "per_second": args.messages / seconds, "wall_seconds": wall,
            "checked_twice": float(retried or 0), "load_before": load_before,
            "load_after": os.getloadavg()[0]}


async def _drained(engine: AsyncEngine, topic: str) -> None:
    """Poll (the only signal there is: the workers are other processes) until no message of
    this run is pending-send."""
    pending = 1
    while pending:
        await asyncio.sleep(0.2)
        async with engine.connect() as conn:
            pending = int((await conn.execute(text(
                "SELECT count(*) FROM messages WHERE topic = :t AND state = 'pending-send'"),
                {"t": topic})).scalar() or 0)


async def main(args: argparse.Namespace, stack: Stack) -> list[dict[str, float]]:
    engine = create_engine(stack.settings(), pool_size=4)
    try:
        await AppStore(engine).create(AppSpec(
            APP, ("bench.*",), (), (f"http://127.0.0.1:{stack.callback_port}/",)))
        return [await measure(stack, engine, args, count, run)
                for run, count in enumerate(args.workers)]
    finally:
        await engine.dispose()


def report(results: list[dict[str, float]], args: argparse.Namespace) -> None:
    print(f"\ncheck-back throughput: {args.messages} messages per run, batch {args.batch_size},"
          f" concurrency {args.concurrency} per worker, {os.cpu_count()} CPUs")
    print(f"{'workers':>8} {'seconds':>9} {'resolved/s':>11} {'checked twice':>14} "
          f"{'load avg (1 min) before/after':>30}")
    for row in results:
        load = f"{row['load_before']:.2f} / {row['load_after']:.2f}"
        print(f"{int(row['workers']):>8} {row['seconds']:>9.2f} {row['per_second']:>11.0f} "
              f"{int(row['checked_twice']):>14} {load:>30}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--serve-callback", type=int, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def run() -> int:
    args = parse_args()
    if args.serve_callback:
        serve_callback(args.serve_callback)
        return 0
    root = Path(tempfile.mkdtemp(prefix="rms-checkback-bench-"))
    stack = Stack(root, EmbeddedPostgres(root / "pg", fsync=False),
                  EmbeddedKafka(log_path=root / "tansu.log"), free_port())
    try:
        stack.start()
        report(asyncio.run(main(args, stack)), args)
    finally:
        stack.stop()
    print(f"logs: {root}")
    return 0


if __name__ == "__main__":
    sys.exit(run())
