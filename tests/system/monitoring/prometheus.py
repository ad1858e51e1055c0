"""A real Prometheus server (Debian's ``prometheus`` package: ``/usr/bin/prometheus``) on a
free port, scraping given targets every second and evaluating given rule files, queried over
its HTTP API."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from rms.devstack.embedded import free_port
from rms.devstack.reaper import tied_to_parent
from tests.system.deploy.test_deploy_manifests import ALERT_RULES
from tests.system.deploy.tools import checker_missing
from tests.system.faults.cluster import Stack, metrics_address

SCRAPE_SECONDS = 1
ALERT_SECONDS = 60.0  # from a condition forced to its alert firing (rules held 2 s)
ALERT_HOLD = "2s"  # every rule's `for:` in the test copy; nothing else differs
START_SECONDS = 30.0
STOP_SECONDS = 10.0
# Grafana's $__rate_interval: max(4 x the scrape interval, the step + one scrape interval)
RATE_INTERVAL = f"{4 * SCRAPE_SECONDS + SCRAPE_SECONDS}s"


def executable() -> str | None:
    return shutil.which("prometheus")


def with_short_holds(rules: Path, hold: str) -> dict[str, Any]:
    """The shipped rules with every ``for:`` shortened to ``hold`` and nothing else changed,
    so a test sees them fire in seconds instead of minutes."""
    parsed = yaml.safe_load(rules.read_text())
    for group in parsed["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = hold
    return dict(parsed)


@dataclass
class Prometheus:
    base: Path
    targets: list[str]
    rules: dict[str, Any]
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        found = executable()
        assert found is not None
        self.base.mkdir(parents=True, exist_ok=True)
        (self.base / "rules.yml").write_text(yaml.safe_dump(self.rules))
        config = {
            "global": {"scrape_interval": f"{SCRAPE_SECONDS}s",
                       "scrape_timeout": f"{SCRAPE_SECONDS}s",
                       "evaluation_interval": f"{SCRAPE_SECONDS}s"},
            "rule_files": [str(self.base / "rules.yml")],
            "scrape_configs": [{"job_name": "rms",
                                "static_configs": [{"targets": self.targets}]}],
        }
        (self.base / "prometheus.yml").write_text(yaml.safe_dump(config))
        with (self.base / "prometheus.log").open("ab") as sink:
            self.process = subprocess.Popen(
                [found, f"--config.file={self.base / 'prometheus.yml'}",
                 f"--storage.tsdb.path={self.base / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=sink, stderr=subprocess.STDOUT, preexec_fn=tied_to_parent())
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            assert self.process is not None and self.process.poll() is None, self.log_tail()
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"Prometheus not ready in {START_SECONDS} s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_SECONDS)

    def log_tail(self, chars: int = 3000) -> str:
        log = self.base / "prometheus.log"
        return log.read_text(errors="replace")[-chars:] if log.exists() else ""

    async def query(self, http: httpx.AsyncClient, expr: str) -> dict[str, Any]:
        """The instant query's answer (``status``, ``data`` or ``error``), as Prometheus gave
        it."""
        response = await http.get(f"{self.url}/api/v1/query", params={"query": expr},
                                  timeout=10)
        return dict(response.json())

    async def firing(self, http: httpx.AsyncClient) -> list[dict[str, str]]:
        """The labels of every firing alert."""
        response = await http.get(f"{self.url}/api/v1/alerts", timeout=10)
        alerts = response.json()["data"]["alerts"]
        return [alert["labels"] for alert in alerts if alert["state"] == "firing"]

    async def up(self, http: httpx.AsyncClient) -> dict[str, float]:
        """Each target's ``up``."""
        answer = await self.query(http, "up")
        return {r["metric"]["instance"]: float(r["value"][1]) for r in answer["data"]["result"]}

    async def wait_firing(self, http: httpx.AsyncClient, alertname: str, **labels: str) -> float:
        """Seconds until the alert ``alertname`` with ``labels`` fires."""
        started = time.monotonic()
        wanted = {"alertname": alertname, **labels}
        while not any(wanted.items() <= alert.items() for alert in await self.firing(http)):
            assert time.monotonic() - started < ALERT_SECONDS, (wanted, await self.firing(http))
            await asyncio.sleep(0.5)
        return time.monotonic() - started


@contextlib.contextmanager
def scraping(stack: Stack) -> Iterator[Prometheus]:
    """Prometheus scraping every process of ``stack`` every second, with the shipped alert
    rules (their `for:` shortened); stopped at the end, also when the test fails."""
    if executable() is None:
        checker_missing("the Prometheus server is not installed (bash scripts/system-deps.sh "
                        "installs Debian's prometheus)")
    server = Prometheus(stack.base / "prometheus",
                        [metrics_address(p) for p in stack.processes],
                        with_short_holds(ALERT_RULES, ALERT_HOLD))
    try:
        server.start()
        yield server
    finally:
        server.stop()
