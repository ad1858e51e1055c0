"""The real commands, as a user runs them: ``rms dev`` end to end, and configuration errors."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from rms.devstack.embedded import free_port


def _rms(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None
         ) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "rms.cli", *args], env=env, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_ready(url: str, process: subprocess.Popen[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url}/readyz never answered 200")


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_rms_dev_starts_serves_and_stops_cleanly(tmp_path: Path) -> None:
    port = free_port()
    data_dir = tmp_path / "dev"
    process = _rms("dev", "--port", str(port), "--data-dir", str(data_dir), cwd=tmp_path)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, timeout=90)
        auth = {"Authorization": "Bearer rms_dev_orders_key"}
        body = {"message_id": "order-1-paid", "topic": "orders.paid", "payload": {"order": 1},
                "check_url": f"http://127.0.0.1:{port + 1}/rms/check"}
        prepared = httpx.post(f"{url}/v1/messages", json=body, headers=auth, timeout=10)
        assert prepared.status_code == 201, prepared.text
        confirmed = httpx.post(f"{url}/v1/messages/order-1-paid/confirm", headers=auth,
                               timeout=10)
        assert confirmed.json()["state"] == "sent"
        _dev_env_reaches_this_run(data_dir, url)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            output, _ = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()  # its watchdog stops what it started
            output, _ = process.communicate(timeout=30)
            raise AssertionError(f"rms dev did not stop within 60 s of SIGINT:\n"
                                 f"{output[-3000:]}") from None
    assert process.returncode == 0, output
    assert "rms dev: stopped." in output
    assert "Warning" not in output, output  # the banner is RMS's own, no library noise
    assert f"rms report --out {data_dir / 'report'}" in output
    assert not (data_dir / "pg" / "postmaster.pid").exists()  # PostgreSQL stopped cleanly
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{url}/healthz", timeout=1)


def test_serve_refuses_to_start_without_admin_token(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")}
    process = _rms("serve", "--port", str(free_port()), env=env, cwd=tmp_path)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 2
    assert "RMS_ADMIN_TOKEN is required" in output


def test_serve_on_an_address_in_use_says_so_in_one_line(tmp_path: Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")}
    try:
        process = _rms("serve", "--port", str(port), env=env | {"RMS_ADMIN_TOKEN": "t" * 32},
                       cwd=tmp_path)
        output, _ = process.communicate(timeout=60)
    finally:
        taken.close()
    assert process.returncode == 1, output
    assert output.strip().splitlines()[-1] == (
        f"rms serve: cannot listen on 127.0.0.1:{port}: Address already in use"), output


def test_unknown_command_is_a_usage_error() -> None:
    process = _rms("frobnicate")
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 2
    assert "unknown command 'frobnicate'" in output


def test_version() -> None:
    from importlib.metadata import version

    process = _rms("--version")
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 0
    assert output.strip() == f"rms {version('rms-server')}"


@pytest.mark.parametrize("command", [["dead", name] for name in
                                     ("list", "resend", "confirm", "cancel", "stats")]
                         + [["topics", "create"]])
def test_every_sub_command_says_what_it_does(command: list[str]) -> None:
    process = _rms(*command, "--help")
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 0
    description = output.split("\n\n")[1].strip()
    assert description and not description.startswith(("positional", "options")), output


def _dev_env_reaches_this_run(data_dir: Path, url: str) -> None:
    """``.rms-dev/dev.env`` names this run's ports and token, and the report folder the
    dashboard reads (no report there yet: the dashboard says which command writes it)."""
    exported = dict(line.removeprefix("export ").split("=", 1)
                    for line in (data_dir / "dev.env").read_text().splitlines()
                    if line.startswith("export "))
    values = {name: value.strip("'") for name, value in exported.items()}
    assert values["RMS_URL"] == url
    assert values["RMS_REPORT_DIR"] == str(data_dir / "report")
    admin = {"Authorization": f"Bearer {values['RMS_ADMIN_TOKEN']}"}
    summary = httpx.get(f"{url}/v1/admin/report/summary", headers=admin, timeout=10)
    assert summary.status_code == 404, summary.text
    assert f"rms report --out {data_dir / 'report'}" in summary.json()["detail"]
