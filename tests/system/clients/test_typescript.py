"""The TypeScript client library (clients/typescript, npm package rms-client): its own
node:test suite, built with tsc and run with ``npm test`` against the live RMS, PostgreSQL and
Kafka of :func:`tests.system.clients.fixtures.client_env`. Dependencies come from the npm registry
with ``npm ci`` into the package's node_modules, again only when package-lock.json changed."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from tests.system.clients.fixtures import require_tool, run_suite

PACKAGE = Path(__file__).resolve().parents[3] / "clients" / "typescript"
STAMP = PACKAGE / "node_modules" / ".rms-package-lock.sha256"
INSTALL_SECONDS = 600
SUITE_SECONDS = 300
NODE_MAJOR = 20  # the package's "engines": node:test with --test-concurrency, global fetch


def _install(npm: str) -> None:
    """``npm ci`` unless node_modules was installed from this very package-lock.json."""
    digest = hashlib.sha256((PACKAGE / "package-lock.json").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text().strip() == digest:
        return
    done = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=PACKAGE,
                          capture_output=True, text=True, timeout=INSTALL_SECONDS, check=False)
    if done.returncode != 0:
        pytest.fail(f"npm ci failed in {PACKAGE}:\n{(done.stdout + done.stderr)[-4000:]}")
    STAMP.write_text(digest + "\n")


@pytest.mark.timeout(INSTALL_SECONDS + SUITE_SECONDS + 60)
def test_typescript_client_suite(client_env: dict[str, str]) -> None:
    _require_node(require_tool("node"))
    npm = require_tool("npm")
    _install(npm)
    run_suite([npm, "test"], PACKAGE, client_env | {"RMS_LIVE_REQUIRED": "1"}, SUITE_SECONDS)


def _require_node(node: str) -> None:
    """An older Node.js counts as a missing toolchain: skipped with the reason, failed in CI."""
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30,
                             check=False).stdout.strip()
    major = version.removeprefix("v").split(".")[0]
    if not major.isdigit() or int(major) < NODE_MAJOR:
        reason = (f"node {version or '(unknown version)'} is older than {NODE_MAJOR}: the "
                  "TypeScript client's tests cannot run")
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
