"""``rms confirm-worker``: check back on pending-send messages every
``RMS_WORKER_INTERVAL_SECONDS`` until SIGINT/SIGTERM. Run as many as you like against one
database: claims never overlap."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rms.config import Settings

NAME = "confirm-worker"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--metrics-port", type=int, default=0,
                        help="serve Prometheus metrics on this port (default 0: off)")
    parser.add_argument("--metrics-host", default="127.0.0.1",
                        help="bind address of the metrics server (default 127.0.0.1)")


def run(args: argparse.Namespace) -> int:
    from rms.config import ConfigError, Settings, config_problem
    from rms.logging import configure as configure_logging

    try:
        settings = Settings()
    except (ConfigError, ValueError) as exc:
        print(f"rms {NAME}: configuration error: {config_problem(exc)}", file=sys.stderr)
        return 2
    from rms.store.database import DatabaseUrlError, database_location

    try:
        database_location(settings.database_url)
    except DatabaseUrlError as exc:
        print(f"rms {NAME}: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_json)
    if args.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(args.metrics_port, addr=args.metrics_host)
    _run_loop(_serve(settings))
    return 0


async def _serve(settings: Settings) -> None:
    from confirm_service.runtime import confirm_worker
    from rms.worker import run_forever

    async with confirm_worker(settings) as worker:
        await run_forever(worker.tick, settings.worker_interval_seconds, NAME)


def _run_loop(main: Coroutine[Any, Any, None]) -> None:
    """uvloop when available (as ``rms serve`` uses), else the standard loop."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux and macOS
        asyncio.run(main)
        return
    uvloop.run(main)
