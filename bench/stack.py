"""The system under test: either the bench's own stack (embedded PostgreSQL with fsync on,
Apache Kafka, migrations, ``rms serve`` as a subprocess) or an existing one (``--target``), plus the
bench's helper processes (consumer, callback server, workers, bare baseline), each registered
with the CPU/RSS sampler under a group name.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from aiokafka import AIOKafkaProducer

from bench.kafka_options import kafka_options, security_environment
from bench.procs import Sampler
from rms.devstack.embedded import (
    EmbeddedPostgres,
    free_port,
    pg_binary,
    remove_tree,
    wait_for_port,
)
from rms.devstack.kafka_broker import EmbeddedKafka
from rms.devstack.reaper import PidFile, RunLock, start_watchdog, stop_groups, tied_to_parent
from rms.store.dburl import parse_database_url
from rms.store.migrate import upgrade

ADMIN_TOKEN = "bench-admin-token"
TOPICS = {path: f"bench.{path}" for path in
          ("happy", "oneshot", "bulk", "transaction", "checkback", "redelivery", "delayed",
           "bare", "soak", "ordered", "overload", "tenants", "fanout")}
# the bench app consumes every topic but the fan-out path's, which its own consumer apps read
# (bench/fanout.py): an app consuming a topic is a subscriber of its messages
CONSUMED = [topic for path, topic in TOPICS.items() if path != "fanout"]
BARE_ACK_TOPIC = "bench.bare-acks"
STOP_SECONDS = 15
LOADGEN_PREFIX = "loadgen-"  # the name of every load generator process


class StackError(RuntimeError):
    """The stack could not start or a process died."""


@dataclass
class Stack:
    work: Path
    api_url: str
    database_url: str
    bootstrap: str
    ack_topic: str
    admin_token: str
    sampler: Sampler
    own: bool
    callback_port: int = field(default_factory=free_port)
    app: str = ""
    signing_secret: str = ""  # the bench app's: the consumer signs its ack records with it
    api_key: str = ""
    postgres: EmbeddedPostgres | None = None
    kafka: EmbeddedKafka | None = None
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    # an own stack's process groups, which its watchdog stops if the bench dies (as rms dev's)
    pid_file: PidFile | None = None
    watchdog: subprocess.Popen[bytes] | None = None
    # --pin-serve: the CPUs of the measured servers (everything else runs on the others)
    serve_cpus: frozenset[int] | None = None

    @property
    def dsn(self) -> str:
        """The libpq URL asyncpg connects with, as every RMS command reads the database URL."""
        return parse_database_url(self.database_url).dsn()

    @property
    def check_url(self) -> str:
        return f"{self.check_prefix}check"

    @property
    def check_prefix(self) -> str:
        """What a bench app's ``check_url_prefixes`` holds: the callback server's root."""
        return f"http://127.0.0.1:{self.callback_port}/"

    def env(self, **extra: str) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")}
        if not self.own:  # the target's cluster may require TLS and SASL
            base |= security_environment()
        return base | {
            "RMS_DATABASE_URL": self.database_url, "RMS_KAFKA_BOOTSTRAP_SERVERS": self.bootstrap,
            "RMS_ADMIN_TOKEN": self.admin_token, "RMS_ALLOW_PRIVATE_CALLBACKS": "true",
            "RMS_ACK_TOPIC": self.ack_topic} | extra

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None,
              group: str | None = None, measured: bool = False) -> subprocess.Popen[bytes]:
        """Start ``python argv`` as ``name``; ``measured``: a server whose figures the run
        reports (``rms serve``, the bare server), on ``serve_cpus`` when set."""
        log = (self.work / f"{name}.log").open("ab")
        # a child of a thread but the main one would get the parent-death signal at the
        # thread's end: those are left to the watchdog
        main = threading.current_thread() is threading.main_thread()
        process = subprocess.Popen([sys.executable, *argv], env=env or self.env(), stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True,
                                   preexec_fn=_preexec(tied_to_parent() if main else None,
                                                       self.serve_cpus if measured else None))
        log.close()
        if self.pid_file is not None:
            self.pid_file.record(process.pid)
        self.processes[name] = process
        self.sampler.add(group or name, process.pid)
        return process

    def stop_process(self, name: str, group: str | None = None) -> None:
        process = self.processes.pop(name, None)
        self.sampler.remove(group or name)
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)

    def check_alive(self) -> None:
        """Raise if a process of the stack has exited (a load generator is checked by the
        thread that drives it: another may run and end beside it)."""
        for name, process in list(self.processes.items()):
            if not name.startswith(LOADGEN_PREFIX) and process.poll() is not None:
                raise StackError(f"{name} exited with {process.returncode}; see "
                                 f"{self.work / (name + '.log')}")

    def log_contains(self, name: str, text: bytes) -> bool:
        log = self.work / f"{name}.log"
        return log.exists() and text in log.read_bytes()

    def wait_log(self, name: str, text: bytes, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.log_contains(name, text):
            self.check_alive()
            if time.monotonic() > deadline:
                raise StackError(f"{name} did not log {text!r} in {timeout:.0f}s")
            time.sleep(0.05)

    def start_watchdog(self) -> None:
        """The watchdog of an own stack (``rms dev``'s): when the bench dies however it dies,
        it stops every recorded process group and the PostgreSQL of the work dir."""
        assert self.postgres is not None
        lock = RunLock(self.work / "bench.lock")
        lock.acquire()
        self.pid_file = PidFile(self.work / "bench.pids")
        self.watchdog = start_watchdog(self.pid_file, str(pg_binary("pg_ctl")),
                                       self.postgres.data_dir, self.postgres.run_as,
                                       self.work / "watchdog.log", lock)

    def stop(self) -> None:
        if self.watchdog is not None:  # first, so that it cannot act on what outlives this
            self.watchdog.kill()
            self.watchdog.wait(5)
        for name in list(self.processes):
            self.stop_process(name)
        if self.kafka is not None:
            self.kafka.stop()
        if self.postgres is not None:
            self.postgres.stop()
            remove_tree(self.postgres.data_dir)  # the logs stay in the work dir
        if self.pid_file is not None:  # groups started without a name that outlived their stop
            stop_groups(self.pid_file.pids(), grace=5.0)
            self.pid_file.clear()


def pin_serve(wanted: bool) -> frozenset[int] | None:
    """With ``wanted`` (``--pin-serve``, Linux): this process, and so everything it starts
    from now on, runs on every CPU it may use but the lowest, which is kept for the measured
    servers (returned). None when not wanted; StackError with fewer than two CPUs."""
    if not wanted:
        return None
    cpus = os.sched_getaffinity(0)
    if len(cpus) < 2:
        raise StackError(f"--pin-serve needs two CPUs or more; this process may use {len(cpus)}")
    serve = frozenset({min(cpus)})
    os.sched_setaffinity(0, cpus - serve)
    return serve


def affinities(stack: Stack) -> dict[str, list[int]]:
    """The CPUs each process of the stack may run on, read from the running processes."""
    pids = {name: process.pid for name, process in stack.processes.items()}
    if stack.postgres is not None:
        pids["postgres"] = _postmaster_pid(stack.postgres)
    if stack.kafka is not None and stack.kafka.nodes[0].process is not None:
        pids["kafka"] = stack.kafka.nodes[0].process.pid
    found = {}
    for name, pid in pids.items():
        with contextlib.suppress(ProcessLookupError):  # a load generator that has ended
            found[name] = sorted(os.sched_getaffinity(pid))
    return found


def _preexec(tie: Callable[[], None] | None, cpus: frozenset[int] | None
             ) -> Callable[[], None] | None:
    """The child's set-up before it runs: tied to this process's life, and on ``cpus``."""
    if tie is None and cpus is None:
        return None

    def preexec() -> None:
        if cpus is not None:
            os.sched_setaffinity(0, cpus)
        if tie is not None:
            tie()

    return preexec


def wait_http(url: str, timeout: float = 60.0, stack: Stack | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if stack is not None:
            stack.check_alive()
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise StackError(f"{url} not ready after {timeout:.0f}s")


def start_serve(stack: Stack, workers: int, confirm_answer: str = "published") -> None:
    """The measured ``rms serve``, with its defaults but for ``RMS_CONFIRM_ANSWER`` and any
    ``RMS_ADMISSION_*`` setting of the benchmark's own environment (to measure other limits,
    or none)."""
    port = int(stack.api_url.rsplit(":", 1)[1])
    tuning = {k: v for k, v in os.environ.items() if k.startswith("RMS_ADMISSION_")}
    stack.spawn("rms-serve", ["-m", "rms.cli", "serve", "--port", str(port),
                              "--workers", str(workers)],
                stack.env(**tuning | {"RMS_CONFIRM_ANSWER": confirm_answer}), measured=True)
    wait_http(f"{stack.api_url}/readyz", stack=stack)


def own_stack(args: argparse.Namespace, sampler: Sampler) -> Stack:
    work = Path(tempfile.mkdtemp(prefix="rms-bench-"))
    postgres = EmbeddedPostgres(work / "pg", fsync=True)
    kafka = EmbeddedKafka(work / "kafka", heap_mb=1024)
    stack = Stack(work, f"http://127.0.0.1:{free_port()}", postgres.url("rms"),
                  kafka.bootstrap_servers, "rms.acks", ADMIN_TOKEN, sampler, own=True,
                  postgres=postgres, kafka=kafka, serve_cpus=pin_serve(args.pin_serve))
    try:
        postgres.start()
        stack.start_watchdog()
        assert stack.pid_file is not None
        for node in kafka.nodes:
            node.preexec_fn = tied_to_parent()
        kafka.start()
        for node in kafka.nodes:
            if node.process is not None:
                stack.pid_file.record(node.process.pid)
        postgres.create_database("rms")
        upgrade(postgres.url("rms"))
        sampler.add("postgres", _postmaster_pid(postgres))
        assert kafka.nodes[0].process is not None
        sampler.add("kafka", kafka.nodes[0].process.pid)
        start_serve(stack, args.api_workers, args.confirm_answer)
    except BaseException:
        stack.stop()
        raise
    return stack


def target_stack(args: argparse.Namespace, sampler: Sampler) -> Stack:
    if not (args.database_url and args.kafka and args.admin_token):
        raise StackError("--target needs --database-url, --kafka and --admin-token")
    work = Path(tempfile.mkdtemp(prefix="rms-bench-"))
    wait_http(f"{args.target.rstrip('/')}/readyz", timeout=10)
    return Stack(work, args.target.rstrip("/"), args.database_url, args.kafka, args.ack_topic,
                 args.admin_token, sampler, own=False)


def _postmaster_pid(postgres: EmbeddedPostgres) -> int:
    return int((postgres.data_dir / "postmaster.pid").read_text().split()[0])


def register_app(stack: Stack) -> None:
    """One app that produces ``bench.*``, consumes every bench topic but the fan-out path's and
    may be called back locally; its keyed messages on the ordered path's topic are published in
    confirm order per key."""
    stack.app = f"bench-{uuid.uuid4().hex[:8]}"
    app = create_app(stack, {"name": stack.app, "produce_topics": ["bench.*"],
                             "consume_topics": CONSUMED,
                             "check_url_prefixes": [stack.check_prefix],
                             "ordered_topics": [TOPICS["ordered"]]})
    stack.api_key = app["api_key"]
    stack.signing_secret = app["signing_secret"]


def create_app(stack: Stack, body: dict[str, Any]) -> dict[str, Any]:
    """``POST /v1/admin/apps``: the app with its ``api_key`` and ``signing_secret``."""
    response = httpx.post(f"{stack.api_url}/v1/admin/apps",
                          headers={"Authorization": f"Bearer {stack.admin_token}"}, json=body,
                          timeout=10)
    if response.status_code != 201:
        raise StackError(f"cannot register the bench app {body['name']}: "
                         f"{response.status_code} {response.text}")
    app: dict[str, Any] = response.json()
    return app


async def create_topics(bootstrap: str, topics: list[str]) -> None:
    """Produce one header-less record to each topic (the consumer ignores it), so every topic
    exists before the consumer subscribes."""
    producer = AIOKafkaProducer(**kafka_options(bootstrap), enable_idempotence=False)
    await producer.start()
    try:
        await asyncio.gather(*(producer.send_and_wait(t, b"{}") for t in topics))
    finally:
        await producer.stop()


def start_helpers(stack: Stack) -> None:
    """The consumer (acks every record; delivery 1 of the redelivery path is not acked) and
    the callback server."""
    topics = CONSUMED
    asyncio.run(create_topics(stack.bootstrap, [*topics, stack.ack_topic, BARE_ACK_TOPIC]))
    ready = stack.work / "consumer.ready"
    stack.spawn("consumer", [
        "-m", "bench.consumer", "--bootstrap", stack.bootstrap, "--topics", ",".join(topics),
        "--ack-topic", stack.ack_topic, "--consumer-app", stack.app,
        "--skip-first", TOPICS["redelivery"], "--route", f"{TOPICS['bare']}={BARE_ACK_TOPIC}",
        "--out", str(receipts_file(stack)), "--ready", str(ready)],
        env=stack.env(BENCH_SIGNING_SECRET=stack.signing_secret))
    stack.spawn("callback", ["-m", "bench.callback", str(stack.callback_port)])
    wait_for_port("127.0.0.1", stack.callback_port, 30)
    deadline = time.monotonic() + 60
    while not ready.exists():
        stack.check_alive()
        if time.monotonic() > deadline:
            raise StackError("the consumer did not get its partitions in 60s")
        time.sleep(0.05)


def receipts_file(stack: Stack) -> Path:
    return stack.work / "receipts.tsv"
