"""The Go client library (clients/go) passes its own suite, ``go test ./...``, against a live
RMS, PostgreSQL and Kafka. Modules are fetched by Go into its module cache on the first run
(go.sum is committed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.system.clients.fixtures import require_tool, run_suite

CLIENT = Path(__file__).resolve().parents[3] / "clients" / "go"


# the first run downloads the modules and compiles them (about 3 minutes on a busy machine)
@pytest.mark.timeout(900)
def test_go_client_suite(client_env: dict[str, str]) -> None:
    go = require_tool("go")
    env = client_env | {"GOFLAGS": "-mod=readonly", "RMS_GO_LIVE": "required"}
    run_suite([go, "vet", "./..."], CLIENT, env, timeout=420)
    run_suite([go, "test", "-count=1", "-timeout=300s", "./..."], CLIENT, env, timeout=420)
