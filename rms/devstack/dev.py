"""``rms dev``: the whole system on one machine for a first run and for tests: embedded
PostgreSQL and Apache Kafka (KRaft, one node; the data of both kept under ``--data-dir``),
migrations, the API, the confirm and recovery workers and the demo order/points services, each
a real process. Ctrl-C stops everything cleanly."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from rms.devstack.embedded import EmbeddedError, EmbeddedPostgres, pg_binary
from rms.devstack.kafka_broker import EmbeddedKafka, KafkaUnavailable
from rms.devstack.reaper import (
    FolderInUse,
    PidFile,
    RunLock,
    Stopped,
    start_watchdog,
    stop_groups,
    stop_leftovers,
    stop_on_signals,
    tied_to_parent,
)
from rms.kafka.topics import create_topics
from rms.store.migrate import upgrade

ADMIN_TOKEN = "rms-dev-admin-token"  # noqa: S105 - dev mode only, printed at start
ORDERS_KEY = "rms_dev_orders_key"
POINTS_KEY = "rms_dev_points_key"
DEMO_TOPIC_PATTERN = "orders.*"
ACK_TOPIC = "rms.acks"
# the broker creates no topic on its own, as in production: these are created at start (the
# demo's and the README walkthrough's); others with `rms topics create NAME`
DEV_TOPICS = (ACK_TOPIC, "orders.paid", "orders.invoiced")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=8000, help="API port (default 8000)")
    parser.add_argument("--data-dir", type=Path, default=Path(".rms-dev"),
                        help="where PostgreSQL and Kafka data and logs live (default ./.rms-dev)")
    parser.add_argument("--no-demo", action="store_true", help="skip the demo services")
    parser.add_argument("--exit-after", type=float, default=None, help=argparse.SUPPRESS)


@dataclass
class Stack:
    data_dir: Path
    port: int
    postgres: EmbeddedPostgres
    kafka: EmbeddedKafka
    pid_file: PidFile
    lock: RunLock
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    watchdog: subprocess.Popen[bytes] | None = None

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, database: str = "rms") -> dict[str, str]:
        return os.environ | {
            "RMS_DATABASE_URL": self.postgres.url(database),
            "RMS_KAFKA_BOOTSTRAP_SERVERS": self.kafka.bootstrap_servers,
            "RMS_ADMIN_TOKEN": ADMIN_TOKEN,
            "RMS_DEV_MODE": "true",
            "RMS_ALLOW_PRIVATE_CALLBACKS": "true",
            "RMS_LOG_JSON": "false",
            "RMS_URL": self.api_url,
            "RMS_REPORT_DIR": str(self.report_dir),
        }

    @property
    def report_dir(self) -> Path:
        """Where ``rms report --out "$RMS_REPORT_DIR"`` writes the report the dashboard shows."""
        return self.data_dir / "report"

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        with open(self.data_dir / f"{name}.log", "ab") as log:
            process = subprocess.Popen(
                [sys.executable, *argv], env=env or self.env(), stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=tied_to_parent())
        self.processes[name] = process
        self.pid_file.record(process.pid)

    def start_infrastructure(self) -> None:
        """PostgreSQL, the watchdog that stops everything if ``rms dev`` dies, then Kafka."""
        self.postgres.start()
        self.watchdog = start_watchdog(self.pid_file, str(pg_binary("pg_ctl")),
                                       self.postgres.data_dir, self.postgres.run_as,
                                       self.data_dir / "watchdog.log", self.lock)
        for node in self.kafka.nodes:
            node.preexec_fn = tied_to_parent()
        self.kafka.start()
        for node in self.kafka.nodes:
            if node.process is not None:
                self.pid_file.record(node.process.pid)

    def stop(self) -> None:
        """Everything, in reverse order of start; the watchdog first, so that it cannot act on
        a next run's processes."""
        if self.watchdog is not None:
            self.watchdog.kill()
            self.watchdog.wait(5)
        stop_groups([p.pid for p in self.processes.values()], grace=10.0)
        self.kafka.stop()
        self.postgres.stop()
        self.pid_file.clear()


def run(args: argparse.Namespace) -> int:
    data_dir = args.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    lock = RunLock(data_dir / "dev.lock")
    try:
        lock.acquire()
    except FolderInUse as exc:
        say(f"rms dev: {exc}", error=True)
        return 1
    pid_file = PidFile(data_dir / "dev.pids")
    stop_leftovers(pid_file)  # a run killed with its watchdog must not hold the ports
    stack = Stack(data_dir, args.port, EmbeddedPostgres(data_dir / "pg"),
                  EmbeddedKafka(data_dir / "kafka", auto_create_topics=False), pid_file, lock)
    stop_on_signals()
    try:
        _start(stack, demo=not args.no_demo)
        _write_env(stack)
        _print_welcome(stack, demo=not args.no_demo)
        deadline = None if args.exit_after is None else time.monotonic() + args.exit_after
        while deadline is None or time.monotonic() < deadline:
            _check_children(stack)
            time.sleep(0.2)
    except Stopped:
        pass
    except (DevError, EmbeddedError, KafkaUnavailable) as exc:  # one line, no traceback
        say(f"rms dev: {exc}", error=True)
        return 1
    finally:
        say("\nrms dev: stopping ...")
        stack.stop()
        say("rms dev: stopped.")
    return 0


def say(text: str, *, error: bool = False) -> None:
    """Print, unless the output is gone (``rms dev | tee log`` with tee killed first): then
    stay silent from here on, so that a broken pipe never stops the clean-up."""
    try:
        print(text, file=sys.stderr if error else sys.stdout, flush=True)
    except OSError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            with contextlib.suppress(OSError):
                os.dup2(devnull, fd)
        os.close(devnull)


class DevError(RuntimeError):
    pass


def _start(stack: Stack, *, demo: bool) -> None:
    say("rms dev: starting PostgreSQL and Apache Kafka ...")
    stack.start_infrastructure()
    for database in ("rms", "demo_orders", "demo_points"):
        stack.postgres.ensure_database(database)
    upgrade(stack.postgres.url("rms"))
    _create_topics(stack)
    orders_port, points_port = stack.port + 1, stack.port + 2
    # before the API answers /readyz, so the demo keys work as soon as it does
    secrets = asyncio.run(_demo_apps(stack, orders_port)) if demo else {}
    stack.spawn("api", ["-m", "rms.cli", "serve", "--port", str(stack.port)])
    _wait_ready(stack)
    for name, argv in _workers():
        stack.spawn(name, argv)
    if demo:
        for name, argv, env in _demo_services(stack, orders_port, points_port, secrets):
            stack.spawn(name, argv, env)


def _create_topics(stack: Stack) -> None:
    """The dev topics, as ``rms topics create`` makes them (existing ones are kept)."""
    results = asyncio.run(create_topics({"bootstrap_servers": stack.kafka.bootstrap_servers},
                                        DEV_TOPICS))
    for result in results:
        if result.outcome.startswith("failed"):
            raise DevError(f"cannot create topic {result.topic!r}: {result.outcome}")


def _module_exists(name: str) -> bool:
    from importlib.util import find_spec

    try:
        return find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _workers() -> Iterator[tuple[str, list[str]]]:
    for kind, module in (("confirm-worker", "confirm_service.cli"),
                         ("recovery-worker", "recovery_service.cli")):
        if _module_exists(module):
            yield kind, ["-m", "rms.cli", kind]


def _demo_services(stack: Stack, orders_port: int, points_port: int, secrets: dict[str, str]
                   ) -> Iterator[tuple[str, list[str], dict[str, str]]]:
    if _module_exists("rms.devstack.demo.orders"):
        yield "demo-orders", ["-m", "rms.devstack.demo.orders", "--port", str(orders_port)], stack.env() | {
            "DEMO_RMS_URL": stack.api_url, "DEMO_API_KEY": ORDERS_KEY,
            "DEMO_DATABASE_URL": stack.postgres.url("demo_orders"),
            "DEMO_PORT": str(orders_port),
            "DEMO_SIGNING_SECRET": secrets["orders"],
            "DEMO_CHECK_AFTER_SECONDS": "5"}
    if _module_exists("rms.devstack.demo.points"):
        yield "demo-points", ["-m", "rms.devstack.demo.points", "--port", str(points_port)], stack.env() | {
            "DEMO_RMS_URL": stack.api_url, "DEMO_API_KEY": POINTS_KEY,
            "DEMO_DATABASE_URL": stack.postgres.url("demo_points"),
            "DEMO_PORT": str(points_port),
            "DEMO_SIGNING_SECRET": secrets["points"]}  # signs its ack records (topic acks)


async def _demo_apps(stack: Stack, orders_port: int) -> dict[str, str]:
    """Demo apps with well-known dev keys (dev mode only), created once (a restart keeps them;
    the orders app's callback port follows ``--port``). Returns each one's signing secret."""
    from rms.config import Settings
    from rms.domain.apps import AppSpec
    from rms.domain.errors import Conflict
    from rms.store.apps import AppStore
    from rms.store.database import create_engine

    settings = Settings(database_url=stack.postgres.url("rms"), dev_mode=True)
    engine = create_engine(settings, pool_size=1)
    store = AppStore(engine)
    specs = [
        (AppSpec("orders", (DEMO_TOPIC_PATTERN,), (),
                 (f"http://127.0.0.1:{orders_port}/",), None), ORDERS_KEY),
        (AppSpec("points", (), (DEMO_TOPIC_PATTERN,), ()), POINTS_KEY),
    ]
    try:
        for spec, key in specs:
            with contextlib.suppress(Conflict):
                await store.create(spec, api_key=key)
        await store.set_check_url_prefixes("orders", specs[0][0].check_url_prefixes)
        return {spec.name: (await store.get(spec.name)).signing_secret for spec, _ in specs}
    finally:
        await engine.dispose()


def _wait_ready(stack: Stack, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _check_children(stack)
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{stack.api_url}/readyz", timeout=1.0).status_code == 200:
                return
        time.sleep(0.2)
    raise DevError(f"the API did not become ready in {timeout:.0f}s; see "
                   f"{stack.data_dir / 'api.log'}")


def _check_children(stack: Stack) -> None:
    for name, process in stack.processes.items():
        code = process.poll()
        if code is not None:
            raise DevError(f"{name} exited with code {code}; see {stack.data_dir / name}.log")


def _write_env(stack: Stack) -> None:
    """``<data dir>/dev.env``: what another shell needs to reach this run (its ports change
    with every start): ``source .rms-dev/dev.env``, then ``rms report --out "$RMS_REPORT_DIR"``
    (the report the dashboard shows), ``rms dead list`` ..."""
    values = {"RMS_URL": stack.api_url, "RMS_ADMIN_TOKEN": ADMIN_TOKEN,
              "RMS_DATABASE_URL": stack.postgres.url("rms"),
              "RMS_KAFKA_BOOTSTRAP_SERVERS": stack.kafka.bootstrap_servers,
              "RMS_ACK_TOPIC": ACK_TOPIC, "RMS_REPORT_DIR": str(stack.report_dir)}
    lines = [f"export {name}='{value}'" for name, value in values.items()]
    (stack.data_dir / "dev.env").write_text("# written by rms dev for this run\n"
                                            + "\n".join(lines) + "\n")


def _print_welcome(stack: Stack, *, demo: bool) -> None:
    url = stack.api_url
    lines = [
        "",
        "RMS is running.",
        f"  API            {url}    (OpenAPI: {url}/docs)",
        f"  dashboard      {url}/dashboard    (sign in with the admin token)",
        f"  admin token    {ADMIN_TOKEN}",
        f"  PostgreSQL     {stack.postgres.dsn('rms')}",
        f"  Kafka          {stack.kafka.bootstrap_servers}  (topics {', '.join(DEV_TOPICS)};",
        "                 no topic is created on first use: rms topics create NAME)",
        f"  logs           {stack.data_dir}/*.log",
        f"  other shells   source {stack.data_dir}/dev.env   (then rms dead list, ...)",
        f"  SLA report     rms report --out {stack.report_dir}   (the dashboard shows it)",
    ]
    if demo:
        lines += [
            f"  demo apps      orders (key {ORDERS_KEY}), points (key {POINTS_KEY})",
            "",
            "Try it (the README walks through more):",
            f"  curl -s -X POST {url}/v1/messages -H 'Authorization: Bearer {ORDERS_KEY}' \\",
            "       -H 'Content-Type: application/json' \\",
            "       -d '{\"message_id\": \"order-1-paid\", \"topic\": \"orders.paid\", "
            "\"payload\": {\"order\": 1}, \"check_url\": "
            f"\"http://127.0.0.1:{stack.port + 1}/rms/check\"}}'",
            f"  curl -s -X POST {url}/v1/messages/order-1-paid/confirm "
            f"-H 'Authorization: Bearer {ORDERS_KEY}'",
            f"  curl -s -X POST {url}/v1/messages/order-1-paid/ack "
            f"-H 'Authorization: Bearer {POINTS_KEY}'",
        ]
    lines += ["", "Press Ctrl-C to stop."]
    say("\n".join(lines))
