"""The release check: each artifact of ``dist/`` (``make dist``) installed where the repository
cannot be seen, and used against a live RMS made of the suite's PostgreSQL and Kafka.
``RMS_DIST`` names another folder of artifacts to check (``make release-check DIST=path``)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest

from release.version import release
from rms.devstack.embedded import EmbeddedPostgres

ROOT = Path(__file__).resolve().parents[3]
DIST = Path(os.environ.get("RMS_DIST") or ROOT / "dist").resolve()
VERSION = release()


def artifact(relative: str) -> Path:
    """A file of dist/; missing, the test fails in CI and skips elsewhere (run make dist)."""
    path = DIST / relative
    if not path.exists():
        reason = f"{path} is missing: run make dist first"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """An environment that names nothing of the repository: no PYTHONPATH, no virtual
    environment, a home of its own (the registries' settings of the host kept)."""
    kept = {name: value for name, value in os.environ.items()
            if name in {"PATH", "LANG", "TZ", "CI"} or name.startswith(("PIP_", "GO", "SSL_"))}
    kept["PATH"] = os.pathsep.join(part for part in kept.get("PATH", "").split(os.pathsep)
                                   if not part.startswith(str(ROOT)))
    return {**kept, "HOME": str(home), **extra}


def run(command: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    """Run a step of the check; fail with its output unless it succeeds."""
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    assert result.returncode == 0, (f"{' '.join(command)} exited {result.returncode}:\n"
                                    f"{result.stdout[-4000:]}\n{result.stderr[-6000:]}")
    return result.stdout


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def create_app(rms_url: str, admin_token: str, name: str, **topics: list[str]) -> dict[str, str]:
    """A new app of the live RMS (``produce_topics``, ``consume_topics``,
    ``check_url_prefixes``): its API key and signing secret among the fields."""
    created = httpx.post(f"{rms_url}/v1/admin/apps", timeout=10, json={"name": name, **topics},
                         headers={"Authorization": f"Bearer {admin_token}"})
    assert created.status_code == 201, created.text
    return dict(created.json())


def fresh_database(postgres: EmbeddedPostgres) -> str:
    """An empty database (no migrations: the release's own ``rms migrate`` makes the schema)."""
    name = f"r_{uuid.uuid4().hex[:16]}"
    postgres.create_database(name)
    return postgres.url(name)


def wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"rms serve exited {process.returncode}:\n{log.read_text()[-4000:]}")
        try:
            if httpx.get(f"{url}/readyz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"rms serve was not ready in {seconds:g}s:\n{log.read_text()[-4000:]}")
