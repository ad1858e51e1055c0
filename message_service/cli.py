"""``rms serve``: the HTTP API under uvicorn (uvloop + httptools)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

    from rms.config import Settings


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from rms.config import Settings
    from rms.startup import EXIT_CONFIG, start

    settings = start("serve", Settings)
    if settings is None:
        return EXIT_CONFIG
    from message_service.http_protocol import DeadlineProtocol, configure_deadlines

    configure_deadlines(settings.http_head_timeout_seconds, settings.http_body_timeout_seconds)
    uvicorn.run(
        "message_service.asgi:app" if args.workers > 1 else _app(settings),
        host=args.host, port=args.port, workers=args.workers, loop="uvloop",
        http=DeadlineProtocol, access_log=False, log_level=settings.log_level.lower(),
        lifespan="on", limit_concurrency=settings.http_limit_concurrency,
        log_config=None,  # uvicorn logs through RMS's logging (one format per process)
        timeout_keep_alive=int(max(1, settings.http_keep_alive_seconds)),
    )
    return 0


def _app(settings: Settings) -> FastAPI:
    from message_service import heap
    from message_service.app import create_app

    app = create_app(settings)
    heap.settle()
    return app
