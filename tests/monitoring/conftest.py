"""A live RMS (``rms serve``, a confirm and a recovery worker serving /metrics) on its own
PostgreSQL and single Kafka broker, and a real Prometheus scraping it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.deploy.test_deploy_manifests import ALERT_RULES
from tests.deploy.tools import checker_missing
from tests.faults.cluster import Infra, Stack, metrics_address, running_stack
from tests.monitoring import prometheus
from tests.monitoring.prometheus import Prometheus, with_short_holds

ALERT_HOLD = "2s"  # every rule's `for:` in the test copy; nothing else differs


@pytest.fixture(scope="module")
def infra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Infra]:
    own = Infra(tmp_path_factory.mktemp("monitoring"), brokers=1)
    own.start()
    yield own
    own.stop()


@pytest.fixture
async def live(infra: Infra) -> AsyncIterator[Stack]:
    """RMS with admission control on (its limit is a panel) and metrics on every process."""
    async with running_stack(infra, workers=1, metrics=True,
                             settings={"RMS_ADMISSION_ENABLED": "true"}) as running:
        yield running


@pytest.fixture
def scraping(live: Stack) -> Iterator[Prometheus]:
    """Prometheus scraping every process of ``live`` every second, with the shipped alert
    rules (their `for:` shortened); stopped at the end, also when the test fails."""
    if prometheus.executable() is None:
        checker_missing("the Prometheus server is not installed (bash scripts/system-deps.sh "
                        "installs Debian's prometheus)")
    server = Prometheus(live.base / "prometheus", [metrics_address(p) for p in live.processes],
                        with_short_holds(ALERT_RULES, ALERT_HOLD))
    try:
        server.start()
        yield server
    finally:
        server.stop()
