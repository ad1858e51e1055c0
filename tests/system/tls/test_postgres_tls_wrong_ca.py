"""Every job and long-running process against a PostgreSQL over TLS whose certificate the
configured CA does not sign: one line on stderr naming the certificate error (never a driver's
bare "could not connect" or a traceback, never a fall-back to the clear), and a process that
would otherwise retry it forever as an outage stops at start."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rms.devstack.kafka_broker import EmbeddedKafka
from rms.store.migrate import upgrade
from tests.tls_support import TlsPostgres, tls_postgres_server

DATABASE = "rms_wrong_ca"
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def untrusted_url() -> Iterator[str]:
    """The URL of a TLS-only PostgreSQL, with a CA file that did not sign its certificate."""
    with tls_postgres_server() as found:
        server: TlsPostgres = found
        server.server.create_database(DATABASE)
        upgrade(server.url(DATABASE))
        yield server.url(DATABASE).replace(str(server.cafile), str(server.stranger_ca))


def _rms(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")}
    return subprocess.run([sys.executable, "-m", "rms.cli", *args], env=clean | env, cwd=cwd,
                          capture_output=True, text=True, timeout=240, check=False)


def _assert_names_the_certificate(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "SSLCertVerificationError" in lines[0] or "certificate verify failed" in lines[0], \
        lines[0]
    assert "Traceback" not in result.stderr


def test_rms_report_names_the_certificate_error(untrusted_url: str, tmp_path: Path) -> None:
    result = _rms(["report", "--out", str(tmp_path / "report"), "--master", "local[1]"],
                  {"RMS_DATABASE_URL": untrusted_url}, tmp_path)
    _assert_names_the_certificate(result)
    assert result.returncode == 1
    assert result.stderr.startswith("rms report: the report failed: cannot use PostgreSQL at ")
    assert "FAILED_JDBC" not in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("command", [
    ["export", "--out", "export"], ["retention", "run", "--dry-run"], ["retention", "run"],
    ["migrate"]])
def test_the_other_jobs_name_the_certificate_error(untrusted_url: str, tmp_path: Path,
                                                   command: list[str]) -> None:
    _assert_names_the_certificate(_rms(command, {"RMS_DATABASE_URL": untrusted_url}, tmp_path))


@pytest.mark.parametrize("command", [["recovery-worker", "--once"], ["recovery-worker"],
                                     ["confirm-worker"], ["serve", "--port", "1"]])
def test_the_long_running_processes_stop_at_start_naming_the_certificate_error(
        untrusted_url: str, kafka: EmbeddedKafka, tmp_path: Path, command: list[str]) -> None:
    result = _rms(command, {"RMS_DATABASE_URL": untrusted_url, "RMS_ADMIN_TOKEN": "a" * 16,
                            "RMS_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}, tmp_path)
    _assert_names_the_certificate(result)
    assert result.returncode == 2
    assert result.stderr.startswith(f"rms {command[0]}: cannot use PostgreSQL at ")
