"""A wrong or unreachable RMS_DATABASE_URL: one line naming where PostgreSQL was expected and
why, never a traceback and never the password."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rms.devstack.embedded import free_port

ROOT = Path(__file__).resolve().parents[3]
SECRET = "s3cret-pw"


def _rms(*args: str, url: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")} | {
        "RMS_DATABASE_URL": url, "RMS_ADMIN_TOKEN": "a-long-admin-token"}
    return subprocess.run([sys.executable, "-m", "rms.cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.parametrize(("url", "code", "says"), [
    (f"postgresql+asyncpg://rms:{SECRET}@127.0.0.1:1/rms", 1,
     "cannot use PostgreSQL at 127.0.0.1:1/rms: ConnectionRefusedError"),
    (f"postgresql+asyncpg://rms:{SECRET}@no-such-host.invalid:5432/rms", 1,
     "cannot use PostgreSQL at no-such-host.invalid:5432/rms: gaierror: the host name does "
     "not resolve"),
    (f"postgresql+asyncpg://rms:{SECRET}@db:port/rms", 2,
     "RMS_DATABASE_URL cannot be parsed: its port is not a number"),
    (f"not a url {SECRET}", 2, "RMS_DATABASE_URL cannot be parsed"),
])
def test_migrate_names_the_database_in_one_line(url: str, code: int, says: str) -> None:
    done = _rms("migrate", url=url)
    assert done.returncode == code
    assert done.stdout == ""
    assert done.stderr.startswith(f"rms migrate: {says}"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert SECRET not in done.stderr


@pytest.mark.parametrize("command", ["serve", "confirm-worker", "recovery-worker"])
def test_an_unparsable_url_stops_every_process_in_one_line(command: str) -> None:
    done = _rms(command, url=f"postgresql+asyncpg://rms:{SECRET}@db:port/rms")
    assert done.returncode == 2
    assert done.stderr.strip().endswith("RMS_DATABASE_URL cannot be parsed: its port is not "
                                        "a number"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and SECRET not in done.stderr


@pytest.mark.timeout(60)
def test_serve_names_the_database_it_cannot_reach(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")} | {
        "RMS_DATABASE_URL": f"postgresql+asyncpg://rms:{SECRET}@127.0.0.1:1/rms",
        "RMS_ADMIN_TOKEN": "a-long-admin-token", "RMS_ACK_CONSUMER_ENABLED": "false",
        "RMS_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"}
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        serve = subprocess.Popen([sys.executable, "-m", "rms.cli", "serve", "--port",
                                  str(free_port())], env=env, cwd=ROOT, stdout=sink,
                                 stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while b"database.unreachable" not in log.read_bytes():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
    finally:
        serve.terminate()
        serve.wait(15)
    text = log.read_text()
    assert "cannot use PostgreSQL at 127.0.0.1:1/rms" in text and SECRET not in text


@pytest.mark.parametrize("command", ["serve", "confirm-worker", "recovery-worker"])
def test_configuration_errors_name_the_setting_without_its_value(command: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")} | {
        "RMS_ADMIN_TOKEN": "short", "RMS_DB_POOL_SIZE": f"lots-{SECRET}"}
    done = subprocess.run([sys.executable, "-m", "rms.cli", command], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"rms {command}: configuration error: RMS_DB_POOL_SIZE: "), line
    assert SECRET not in line and "short" not in line and "pydantic" not in line
