"""Redelivery throughput: how many messages per second ``rms recovery-worker`` processes
re-publish, with one worker and with several on one database.

For each worker count it starts a fresh database (embedded PostgreSQL) and a fresh broker
(tansu), seeds ``--messages`` sent messages whose first delivery went out, starts the worker
processes, waits until each is up, then makes every message due at once (one UPDATE) and times,
on the database clock, until every message's re-publish is recorded (its ``published`` event
written and its next ack deadline set). Worker start-up is therefore not in the figure.

    .venv/bin/python bench/redelivery_bench.py --messages 50000 --workers 1 3

Worker settings come from the usual ``RMS_*`` variables (e.g. ``RMS_WORKER_BATCH_SIZE``,
``RMS_WORKER_CONCURRENCY``); the command line overrides the two that matter most.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rms.embedded import EmbeddedKafka, EmbeddedPostgres
from rms.store.migrate import upgrade

SEED = """
INSERT INTO apps (name, api_key_hash, signing_secret) VALUES ('bench', 'bench-key', 'secret');
INSERT INTO messages (message_id, app, topic, payload, state, check_after_seconds, max_checks,
                      ack_timeout_seconds, max_deliveries, confirmed_at, delivery_count,
                      next_delivery_at)
SELECT 'bench-' || n, 'bench', 'bench.redelivery', jsonb_build_object('order', n, 'total', 10),
       'sent', 10, 15, 600, 6, now(), 1, now() + interval '1 day'
FROM generate_series(1, {count}) AS n;
ANALYZE messages;
"""
DONE = ("SELECT count(*) FROM messages WHERE delivery_count = 2 AND claim_token IS NULL "
        "AND next_delivery_at > now() + interval '10 minutes'")


@dataclass
class Result:
    workers: int
    messages: int
    seconds: float
    load_before: float  # 1-minute load average: the machine may be shared
    load_after: float

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else float("inf")


def _start_workers(count: int, env: dict[str, str], log_dir: Path) -> list[subprocess.Popen[bytes]]:
    processes = []
    for index in range(count):
        log = open(log_dir / f"worker-{index}.log", "wb")  # noqa: SIM115 - owned by the child
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "rms.cli", "recovery-worker"], env=env, stdout=log,
            stderr=subprocess.STDOUT))
    try:
        for index, process in enumerate(processes):
            _wait_started(process, log_dir / f"worker-{index}.log")
    except BaseException:
        _stop(processes)
        raise
    return processes


def _wait_started(process: subprocess.Popen[bytes], log_file: Path) -> None:
    deadline = time.monotonic() + 60
    while b"worker.started" not in log_file.read_bytes():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"a worker did not start:\n{log_file.read_text()}")
        time.sleep(0.05)


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


def run_once(postgres: EmbeddedPostgres, workers: int, messages: int, args: argparse.Namespace,
             work_dir: Path) -> Result:
    database = f"bench_{workers}w_{int(time.time())}"
    postgres.create_database(database)
    upgrade(postgres.url(database))
    postgres.psql(SEED.format(count=messages), database)
    kafka = EmbeddedKafka(log_path=work_dir / f"tansu-{workers}.log")
    kafka.start()
    env = os.environ | {
        "RMS_DATABASE_URL": postgres.url(database),
        "RMS_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "RMS_ADMIN_TOKEN": "bench-admin-token",
        "RMS_WORKER_INTERVAL_SECONDS": "0.1",
        "RMS_WORKER_BATCH_SIZE": str(args.batch_size),
        "RMS_WORKER_CONCURRENCY": str(args.concurrency),
        "RMS_LOG_LEVEL": "INFO",
    }
    processes: list[subprocess.Popen[bytes]] = []
    try:
        processes = _start_workers(workers, env, work_dir)
        load_before = os.getloadavg()[0]
        started = float(postgres.psql(
            "UPDATE messages SET next_delivery_at = now(); SELECT extract(epoch FROM now())",
            database).strip().splitlines()[-1])
        deadline = time.monotonic() + args.timeout
        while int(postgres.psql(DONE, database).strip()) < messages:
            if time.monotonic() > deadline:
                raise RuntimeError(f"not all re-published within {args.timeout}s")
            time.sleep(0.2)
        finished = float(postgres.psql(
            "SELECT extract(epoch FROM max(at)) FROM message_events WHERE event = 'published'",
            database).strip())
    finally:
        _stop(processes)
        kafka.stop()
        postgres.psql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    return Result(workers, messages, finished - started, load_before, os.getloadavg()[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--batch-size", type=int,
                        default=int(os.environ.get("RMS_WORKER_BATCH_SIZE", "1000")))
    parser.add_argument("--concurrency", type=int,
                        default=int(os.environ.get("RMS_WORKER_CONCURRENCY", "1000")))
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args(argv)
    work_dir = Path(tempfile.mkdtemp(prefix="rms-redelivery-bench-"))
    postgres = EmbeddedPostgres(work_dir / "pg", fsync=True)
    postgres.start()
    results = []
    try:
        for workers in args.workers:
            result = run_once(postgres, workers, args.messages, args, work_dir)
            results.append(result)
            print(f"{workers} worker(s): {result.messages} re-published in "
                  f"{result.seconds:.2f} s = {result.rate:,.0f} messages/s (load average "
                  f"{result.load_before:.2f} -> {result.load_after:.2f})", flush=True)
    finally:
        postgres.stop()
    print(f"\nredelivery throughput (batch {args.batch_size}, concurrency {args.concurrency}, "
          f"fsync on, {os.cpu_count()} CPUs, logs in {work_dir}):")
    for result in results:
        print(f"  {result.workers} worker(s): {result.rate:>10,.0f} messages/s   (load average "
              f"{result.load_before:.2f} -> {result.load_after:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
