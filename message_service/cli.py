"""``rms serve``: the HTTP API under uvicorn (uvloop + httptools)."""

from __future__ import annotations

import argparse
import socket
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

    from rms.config import Settings


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")


# Descriptors of the one listening socket that the event loop watches. libuv (under uvloop)
# accepts one connection per ready descriptor per loop iteration, so while requests keep the loop
# busy a burst of new connections waits an iteration each: 60 at once took up to 370 ms to be
# read beside 5 ms iterations, where 16 descriptors of the same socket, each accepting one per
# iteration, took 49 ms. The kernel keeps one queue, served in arrival order; a descriptor with
# nothing left to accept costs one failed accept() when a connection arrives.
ACCEPT_DESCRIPTORS = 16
EXIT_LISTEN = 1  # the address cannot be listened on (in use, not this host's, not allowed)


def run(args: argparse.Namespace) -> int:
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE  # its exit code when the app did not start
    from uvicorn.supervisors import Multiprocess

    from rms.config import Settings
    from rms.startup import EXIT_CONFIG, start

    settings = start("serve", Settings)
    if settings is None:
        return EXIT_CONFIG
    from message_service.http_protocol import (
        DeadlineProtocol,
        configure_connections,
        configure_deadlines,
    )

    configure_deadlines(settings.http_head_timeout_seconds, settings.http_body_timeout_seconds)
    configure_connections(settings.http_limit_concurrency, settings.http_health_reserve,
                          settings.http_unauthenticated_keep_alive_seconds)
    try:
        listening = listening_sockets(args.host, args.port, ACCEPT_DESCRIPTORS)
    except OSError as exc:
        print(f"rms serve: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
              file=sys.stderr)
        return EXIT_LISTEN
    config = uvicorn.Config(
        "message_service.asgi:app" if args.workers > 1 else _app(settings),
        host=args.host, port=args.port, workers=args.workers, loop="uvloop",
        http=DeadlineProtocol, access_log=False, log_level=settings.log_level.lower(),
        # the connections are counted by DeadlineProtocol (configure_connections), whose
        # answer above the cap is a problem document with Retry-After
        lifespan="on", limit_concurrency=None,
        log_config=None,  # uvicorn logs through RMS's logging (one format per process)
        timeout_keep_alive=int(max(1, settings.http_keep_alive_seconds)),
    )
    if config.workers > 1:
        Multiprocess(config, sockets=listening).run()
        return 0
    server = uvicorn.Server(config)
    server.run(sockets=listening)
    return 0 if server.started else STARTUP_FAILURE


def listening_sockets(host: str, port: int, descriptors: int) -> list[socket.socket]:
    """One TCP socket bound to ``host:port`` (IPv6 when the host has a colon), as
    ``descriptors`` descriptors of it for the event loop to watch."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.set_inheritable(True)
        others = [sock.dup() for _ in range(descriptors - 1)]
    except OSError:
        sock.close()
        raise
    for other in others:
        other.set_inheritable(True)
    return [sock, *others]


def _app(settings: Settings) -> FastAPI:
    from message_service.app import create_app
    from message_service.http_protocol import configure_admission

    app = create_app(settings)
    configure_admission(app.state.admission)
    return app
