"""``rms confirm-worker``: check back on pending-send messages every
``RMS_WORKER_INTERVAL_SECONDS`` until SIGINT/SIGTERM. Run as many as you like against one
database: claims never overlap."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rms.config import WorkerSettings

NAME = "confirm-worker"


def configure(parser: argparse.ArgumentParser) -> None:
    from rms.startup import add_metrics_arguments

    add_metrics_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from rms.config import WorkerSettings
    from rms.startup import EXIT_CONFIG, run_loop, serve_metrics, start

    settings = start(NAME, WorkerSettings)
    if settings is None:
        return EXIT_CONFIG
    serve_metrics(args)
    run_loop(_serve(settings))
    return 0


async def _serve(settings: WorkerSettings) -> None:
    from confirm_service.runtime import checkback_worker
    from rms.worker import run_forever

    async with checkback_worker(settings) as worker:
        await run_forever(worker.tick, settings.worker_interval_seconds, NAME)
