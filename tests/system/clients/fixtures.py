"""A live RMS for the client libraries' own test suites (Java, Go, TypeScript): a real
``rms serve``, ``rms confirm-worker`` and ``rms recovery-worker`` as processes on a fresh
database of the suite's PostgreSQL and on its Kafka, with short timings, and a second empty
database for the clients' barrier and inbox tables. A language's tests run as one command
(``mvn test``, ``go test``, ``npm test``) with :func:`client_env` in its environment."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from rms.devstack.embedded import EmbeddedPostgres, free_port
from rms.devstack.kafka_broker import EmbeddedKafka
from rms.devstack.reaper import tied_to_parent
from tests.conftest import ADMIN_TOKEN, TEMPLATE_DB

START_SECONDS = 60.0
# where a toolchain may live when its folder is not on PATH (Go's official tarball)
EXTRA_TOOL_DIRS = ("/usr/local/go/bin", "/usr/lib/go/bin")


@dataclass
class LiveRms:
    url: str
    kafka_bootstrap: str
    ack_topic: str
    logs: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def log_tail(self, chars: int = 4000) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-chars:]}"
                         for log in sorted(self.logs.glob("*.log")))


def _database(postgres: EmbeddedPostgres, template: str | None) -> str:
    name = f"c_{uuid.uuid4().hex[:16]}"
    postgres.create_database(name, template=template)
    return name


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as sink:
        return subprocess.Popen([sys.executable, "-m", "rms.cli", *args], env=env, stdout=sink,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=tied_to_parent())


def _wait_ready(live: LiveRms) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        for process in live.processes:
            if process.poll() is not None:
                raise AssertionError(f"an RMS process exited at start:\n{live.log_tail()}")
        try:
            if httpx.get(f"{live.url}/readyz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"RMS did not become ready in {START_SECONDS:g}s:\n{live.log_tail()}")


@pytest.fixture(scope="session")
def live_rms(postgres: EmbeddedPostgres, kafka: EmbeddedKafka,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRms]:
    database = _database(postgres, TEMPLATE_DB)
    unique = uuid.uuid4().hex[:10]
    port = free_port()
    env = {
        **os.environ,
        "RMS_DATABASE_URL": postgres.url(database),
        "RMS_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "RMS_ADMIN_TOKEN": ADMIN_TOKEN,
        "RMS_ALLOW_PRIVATE_CALLBACKS": "true",
        "RMS_ACK_TOPIC": f"rms.acks.{unique}",
        "RMS_ACK_CONSUMER_GROUP": f"rms-acks-{unique}",
        "RMS_CHECK_AFTER_SECONDS": "1",
        "RMS_ACK_TIMEOUT_SECONDS": "3",
        "RMS_WORKER_INTERVAL_SECONDS": "0.2",
        "RMS_DB_POOL_SIZE": "10",
    }
    logs = tmp_path_factory.mktemp("live-rms")
    live = LiveRms(f"http://127.0.0.1:{port}", kafka.bootstrap_servers, env["RMS_ACK_TOPIC"],
                   logs)
    live.processes = [
        _start(["serve", "--port", str(port)], env, logs / "serve.log"),
        _start(["confirm-worker"], env, logs / "confirm-worker.log"),
        _start(["recovery-worker"], env, logs / "recovery-worker.log"),
    ]
    try:
        _wait_ready(live)
        yield live
    finally:
        for process in live.processes:
            process.terminate()
        for process in live.processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
        postgres.psql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


@pytest.fixture
def client_env(live_rms: LiveRms, postgres: EmbeddedPostgres) -> Iterator[dict[str, str]]:
    """The environment of a client library's test command (see the module docstring)."""
    database = _database(postgres, None)
    prefix = uuid.uuid4().hex[:8]
    env = {
        **os.environ,
        "RMS_URL": live_rms.url,
        "RMS_ADMIN_TOKEN": ADMIN_TOKEN,
        "RMS_KAFKA_BOOTSTRAP_SERVERS": live_rms.kafka_bootstrap,
        "RMS_ACK_TOPIC": live_rms.ack_topic,
        "RMS_TEST_DATABASE_URL": f"postgresql://postgres:@127.0.0.1:{postgres.port}/{database}",
        "RMS_TEST_PG_HOST": "127.0.0.1",
        "RMS_TEST_PG_PORT": str(postgres.port),
        "RMS_TEST_PG_USER": "postgres",
        "RMS_TEST_PG_PASSWORD": "",
        "RMS_TEST_PG_DATABASE": database,
        "RMS_TEST_PREFIX": f"t{prefix}",
        "PATH": os.pathsep.join([os.environ.get("PATH", ""), *EXTRA_TOOL_DIRS]),
    }
    yield env
    postgres.psql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def require_tool(name: str) -> str:
    """The tool's path; a missing one skips the test with the reason, or fails it in CI."""
    path = shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""),
                                                    *EXTRA_TOOL_DIRS]))
    if path is None:
        reason = f"{name} is not installed: this client library's tests cannot run"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def run_suite(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> None:
    """Run a client library's test command; fail with its output's tail unless it passes."""
    try:
        result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, timeout=timeout,
                                stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        partial = _text(exc.stdout) + _text(exc.stderr)
        pytest.fail(f"{' '.join(cmd)} did not finish in {timeout:g}s:\n{partial[-6000:]}")
    output = _text(result.stdout) + _text(result.stderr)
    print(output[-20000:])  # shown with -rA or on failure
    if result.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {result.returncode}:\n{output[-8000:]}")


def _text(output: bytes | str | None) -> str:
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""
