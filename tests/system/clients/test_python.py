"""The Python client distribution on its own: a fresh virtual environment gets only
``clients/python`` (with its ``sqlalchemy`` extra, which brings the database driver) and an
ASGI server, none of the server's packages, and runs a prepare -> confirm, a check-back
answered by the client's endpoint and a consumer that acknowledges, two consumer apps on one
topic, a consumer refusing an app name its key does not have, and a consumer's restart,
against a live RMS."""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.system.clients.fixtures import LiveRms, run_suite

ROOT = Path(__file__).resolve().parents[3]
CLIENT = ROOT / "clients" / "python"
SCRIPT = Path(__file__).parent / "python" / "live_client.py"
TWO_CONSUMERS = Path(__file__).parent / "python" / "live_two_consumers.py"
APP_CHECK = Path(__file__).parent / "python" / "live_app_check.py"
RESTART = Path(__file__).parent / "python" / "live_restart.py"
# what a business service must not be made to install for the client
SERVER_ONLY = ("rms", "message_service", "fastapi", "alembic", "apscheduler", "pyspark")
HEAVY = ("fastapi", "sqlalchemy", "alembic", "apscheduler", "pyspark")


@pytest.fixture(scope="module")
def client_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment with the client distribution installed from this checkout."""
    root = tmp_path_factory.mktemp("rms-client-venv")
    # built from a copy, so the build leaves nothing in the checkout
    source = shutil.copytree(CLIENT, root / "source", ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__"))
    venv.create(root, with_pip=False)
    python = root / "bin" / "python"
    # this environment's pip, installing into the new one (its cache is warm)
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--disable-pip-version-check", f"{source}[sqlalchemy]", "uvicorn"],
        capture_output=True, text=True, check=False, timeout=400, cwd=root)
    assert installed.returncode == 0, installed.stderr[-3000:]
    return python


def in_venv(python: Path, code: str) -> str:
    result = subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                            check=False, timeout=60, cwd=python.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip()


@pytest.mark.timeout(600)
def test_the_client_distribution_needs_none_of_the_server(client_python: Path) -> None:
    found = in_venv(client_python, "import importlib.util as u; print(' '.join(n for n in "
                    f"{SERVER_ONLY!r} if u.find_spec(n)))")
    assert found == ""
    requires = in_venv(client_python, "from importlib.metadata import requires; "
                       "print('\\n'.join(requires('rms-client')))").splitlines()
    unconditional = [r for r in requires if "extra ==" not in r]
    assert unconditional and not [r for r in unconditional if r.lower().startswith(HEAVY)]


@pytest.mark.timeout(600)
def test_prepare_confirm_check_back_and_consume_against_a_live_rms(
        client_python: Path, live_rms: LiveRms, client_env: dict[str, str]) -> None:
    run_suite([str(client_python), str(SCRIPT)], cwd=client_python.parent, env=client_env,
              timeout=240)


@pytest.mark.timeout(600)
def test_two_consumer_apps_one_crashing_before_its_ack_against_a_live_rms(
        client_python: Path, live_rms: LiveRms, client_env: dict[str, str]) -> None:
    """One app acks and skips the redelivery meant for the other; the other's consumer dies as
    it acks, is redelivered the message, and acks after its restart: done with both acks."""
    run_suite([str(client_python), str(TWO_CONSUMERS)], cwd=client_python.parent,
              env=client_env, timeout=240)


@pytest.mark.timeout(600)
def test_a_consumer_refuses_an_app_name_its_key_does_not_have_against_a_live_rms(
        client_python: Path, live_rms: LiveRms, client_env: dict[str, str]) -> None:
    """A misspelled app is refused at start with a line saying so; the consumer group is the
    app's name unless given, and another one is warned about. The engine's asyncpg driver comes
    with the sqlalchemy extra alone."""
    run_suite([str(client_python), str(APP_CHECK)], cwd=client_python.parent, env=client_env,
              timeout=240)


@pytest.mark.timeout(600)
def test_a_static_member_restarted_after_a_kill_gets_its_partition_at_once(
        client_python: Path, live_rms: LiveRms, client_env: dict[str, str]) -> None:
    """Killed and started again, a dynamic member waits for Kafka's session timeout; a static
    member (``instance_id``) is handling records within seconds. Prints both gaps."""
    run_suite([str(client_python), str(RESTART)], cwd=client_python.parent, env=client_env,
              timeout=400)
