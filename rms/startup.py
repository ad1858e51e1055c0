"""The one start-up of the long-running RMS processes (``rms serve``, ``rms confirm-worker``,
``rms recovery-worker``): read the process's own settings from the environment (the API reads
all of :class:`~rms.config.Settings`, a worker only :class:`~rms.config.WorkerSettings`), check
the database URL and the Kafka TLS and SASL set-up (a wrong password or an untrusted
certificate is refused by the cluster at once: :func:`rms.kafka.security.login_problem`) and
PostgreSQL's TLS set-up (a server certificate the CA does not sign:
:func:`rms.store.database.tls_problem`),
configure logging and tracing (:mod:`rms_client.tracing`). A configuration that cannot run is one line
on stderr and exit code 2."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

from rms.config import ConfigError, WorkerSettings, config_problem
from rms.kafka.security import kafka_security, login_problem
from rms.logging import configure as configure_logging
from rms.store.database import DatabaseUrlError, database_location, tls_problem
from rms_client import tracing
from rms_client.kafka_security import KafkaSecurityError

S = TypeVar("S", bound=WorkerSettings)
EXIT_CONFIG = 2


def start(command: str, kind: type[S]) -> S | None:
    """The settings of ``rms <command>`` from the environment, with logging configured; None
    (the problem printed as one line on stderr) when the configuration cannot run."""
    try:
        settings = kind()
        security = kafka_security(settings)
        security.client_options()  # reads the TLS files now: a missing one is a config error
    except (ConfigError, KafkaSecurityError, ValueError) as exc:
        print(f"rms {command}: configuration error: {config_problem(exc)}", file=sys.stderr)
        return None
    try:
        database_location(settings.database_url)
    except DatabaseUrlError as exc:
        print(f"rms {command}: {exc}", file=sys.stderr)
        return None
    refused = (asyncio.run(login_problem(settings.kafka_bootstrap_servers, security))
               or asyncio.run(tls_problem(settings.database_url)))
    if refused is not None:
        print(f"rms {command}: {refused}", file=sys.stderr)
        return None
    configure_logging(settings.log_level, settings.log_json)
    tracing.configure_from_environment(f"rms-{command}")
    return settings


def add_metrics_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--metrics-port", type=int, default=0,
                        help="serve Prometheus metrics on this port (default 0: off)")
    parser.add_argument("--metrics-host", default="127.0.0.1",
                        help="bind address of the metrics server (default 127.0.0.1)")


def serve_metrics(args: argparse.Namespace) -> None:
    """The Prometheus endpoint of a worker, when ``--metrics-port`` asks for one."""
    if args.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(args.metrics_port, addr=args.metrics_host)


def run_loop(main: Coroutine[Any, Any, None]) -> None:
    """uvloop when available (about a fifth less CPU per publish), else the standard loop."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux and macOS
        asyncio.run(main)
        return
    uvloop.run(main)

