"""PostgreSQL over TLS (``sslmode=verify-full`` against a CA made at test time; the server
refuses TCP without TLS), and one reading of ``RMS_DATABASE_URL`` in every command, Unix-socket
URLs included."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from confirm_service.runtime import checkback_worker
from rms.config import Settings, WorkerSettings
from rms.devstack.kafka_broker import EmbeddedKafka
from rms.store.database import create_engine
from rms.store.migrate import upgrade
from tests.conftest import ADMIN_TOKEN
from tests.support import Api
from tests.tls_support import TlsPostgres, tls_postgres_server

DATABASE = "rms_tls"
pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def tls_postgres() -> Iterator[TlsPostgres]:
    with tls_postgres_server() as found:
        found.server.create_database(DATABASE)
        upgrade(found.url(DATABASE))  # Alembic reads the URL as every command does
        yield found


def _rms(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")}
    return subprocess.run([sys.executable, "-m", "rms.cli", *args], env=clean | env, cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
async def tls_api(tls_postgres: TlsPostgres, kafka: EmbeddedKafka, unique: str) -> AsyncIterator[Api]:
    from message_service.app import create_app

    settings = Settings(database_url=tls_postgres.url(DATABASE),
                        kafka_bootstrap_servers=kafka.bootstrap_servers, admin_token=ADMIN_TOKEN,
                        allow_private_callbacks=True,
                        ack_topic=f"rms.acks.{unique}", ack_consumer_enabled=False)
    app = create_app(settings)
    async with (app.router.lifespan_context(app),
                httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                  base_url="http://rms.test") as client):
        yield Api(client, ADMIN_TOKEN, settings)


async def _over_tls(url: str) -> bool:
    engine = create_engine(WorkerSettings(database_url=url), pool_size=1)
    try:
        async with engine.connect() as connection:
            row = await connection.execute(text(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"))
            return bool(row.scalar_one())
    finally:
        await engine.dispose()


async def test_the_api_runs_over_verify_full(tls_api: Api, unique: str) -> None:
    orders = await tls_api.create_app("orders")
    message_id = await tls_api.prepared_id(orders, f"orders.{unique}")
    confirmed = await tls_api.post(orders, f"/v1/messages/{message_id}/confirm")
    assert confirmed.status_code == 200 and confirmed.json()["state"] == "sent"
    assert await _over_tls(tls_api.settings.database_url)


async def test_the_workers_run_over_verify_full(tls_postgres: TlsPostgres, kafka: EmbeddedKafka,
                                                tmp_path: Path) -> None:
    settings = WorkerSettings(database_url=tls_postgres.url(DATABASE),
                              kafka_bootstrap_servers=kafka.bootstrap_servers)
    async with checkback_worker(settings) as worker:
        await worker.tick()
    env = {"RMS_DATABASE_URL": tls_postgres.url(DATABASE),
           "RMS_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}
    once = _rms(["recovery-worker", "--once"], env, tmp_path)
    assert once.returncode == 0, once.stderr


def test_an_untrusted_server_or_plain_tcp_is_one_line(tls_postgres: TlsPostgres,
                                                      tmp_path: Path) -> None:
    untrusted = tls_postgres.url(DATABASE).replace(str(tls_postgres.cafile), str(tls_postgres.stranger_ca))
    refused = _rms(["migrate"], {"RMS_DATABASE_URL": untrusted}, tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "SSLCertVerificationError" in refused.stderr
    plain = f"postgresql://postgres@127.0.0.1:{tls_postgres.server.port}/{DATABASE}?sslmode=disable"
    without = _rms(["migrate"], {"RMS_DATABASE_URL": plain}, tmp_path)
    assert without.returncode == 1 and "no encryption" in without.stderr, without.stderr


async def test_every_command_reads_a_unix_socket_url(tls_postgres: TlsPostgres,
                                                     kafka: EmbeddedKafka, tmp_path: Path) -> None:
    url = tls_postgres.socket_url(DATABASE)
    engine = create_engine(WorkerSettings(database_url=url), pool_size=1)  # API and workers
    try:
        async with engine.connect() as connection:
            row = await connection.execute(text("SELECT inet_server_addr() IS NULL"))
            assert row.scalar_one() is True  # a socket has no server address
    finally:
        await engine.dispose()
    env = {"RMS_DATABASE_URL": url, "RMS_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}
    for args in (["migrate"], ["retention", "run", "--dry-run"],
                 ["export", "--out", str(tmp_path / "export")],
                 ["topics", "create", "--no-apps"], ["topics", "create"]):
        done = _rms(args, env, tmp_path)
        assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"
    # the report's JDBC read cannot take a socket: one line with the way out
    report = _rms(["report", "--out", str(tmp_path / "report")], env, tmp_path)
    assert report.returncode == 2, report.stderr
    assert len(report.stderr.strip().splitlines()) == 1, report.stderr
    assert "Unix socket" in report.stderr and "--database-url" in report.stderr
