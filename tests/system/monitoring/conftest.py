"""A live RMS (``rms serve``, a confirm and a recovery worker serving /metrics) on its own
PostgreSQL and single Kafka broker, and a real Prometheus scraping it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.system.faults.cluster import Infra, Stack, running_stack
from tests.system.monitoring import prometheus
from tests.system.monitoring.prometheus import Prometheus


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
    with prometheus.scraping(live) as server:
        yield server
