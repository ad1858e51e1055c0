"""The Java client library (clients/java, Maven io.github.rms-dev:rms-client): its JUnit 5
suite, run with ``mvn -q -B test`` against the live RMS, PostgreSQL and Kafka of
:func:`tests.system.clients.fixtures.client_env`. Maven fetches the dependencies into ~/.m2 on the
first run; later runs need no network."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.system.clients.fixtures import require_tool, run_suite

PROJECT = Path(__file__).resolve().parents[3] / "clients" / "java"
SUITE_SECONDS = 900  # the first run also downloads the dependencies


@pytest.mark.timeout(SUITE_SECONDS + 60)
def test_java_client_suite(client_env: dict[str, str]) -> None:
    require_tool("java")
    require_tool("javac")
    mvn = require_tool("mvn")
    # rms.live=required: a live test that finds no live RMS fails instead of skipping
    run_suite([mvn, "-q", "-B", "test", "-Drms.live=required"], PROJECT, client_env,
              SUITE_SECONDS)
