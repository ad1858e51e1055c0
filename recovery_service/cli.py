"""``rms recovery-worker``: the redelivery worker's process (re-publish unacknowledged messages
until acked, then dead-letter; publish ordered messages in key order)."""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rms.config import WorkerSettings

NAME = "recovery-worker"


def configure(parser: argparse.ArgumentParser) -> None:
    from rms.startup import add_metrics_arguments

    add_metrics_arguments(parser)
    parser.add_argument("--once", action="store_true",
                        help="run one tick and exit (for cron-style use and debugging)")


def run(args: argparse.Namespace) -> int:
    from rms.config import WorkerSettings
    from rms.startup import EXIT_CONFIG, run_loop, serve_metrics, start

    settings = start(NAME, WorkerSettings)
    if settings is None:
        return EXIT_CONFIG
    # A tick that drains a backlog outlasts the interval; the skipped runs are expected.
    logging.getLogger("apscheduler").setLevel(logging.ERROR)
    serve_metrics(args)
    run_loop(_main(settings, once=args.once))
    return 0


async def _main(settings: WorkerSettings, *, once: bool) -> None:
    from recovery_service.runtime import redelivery_worker
    from rms.worker import run_forever

    async with redelivery_worker(settings) as worker:
        if once:
            await worker.tick()
            return
        await run_forever(worker.tick, settings.worker_interval_seconds, NAME)
