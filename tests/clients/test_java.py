"""The Java client library (clients/java) against a live RMS: its JUnit 5 suite, run by Maven
with the live-RMS environment (producer, check-back through the barrier on the JDK server and
the servlet filter, transactions, consumer inbox and both kinds of ack, typed errors).

Maven fetches the dependencies into ~/.m2 on the first run; later runs work offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clients.conftest import require_tool, run_suite

JAVA_CLIENT = Path(__file__).resolve().parents[2] / "clients" / "java"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def test_java_client_suite(client_env: dict[str, str]) -> None:
    require_tool("java")
    require_tool("javac")
    mvn = require_tool("mvn")
    # rms.live=required: a live test that finds no live RMS fails instead of skipping
    run_suite([mvn, "-q", "-B", "test", "-Drms.live=required"], cwd=JAVA_CLIENT,
              env=client_env, timeout=1100)
