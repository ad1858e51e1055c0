"""Fixtures of the fault suite: its own PostgreSQL and Kafka for the whole module (faults
crash and restart them, so never the session-shared ones), RMS processes per scenario. A
scenario runs on the three-node cluster unless it asks for ``single_broker_stack``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.faults.cluster import Infra, Stack, running_stack


@pytest.fixture(scope="module")
def infra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Infra]:
    own = Infra(tmp_path_factory.mktemp("faults"))
    own.start()
    yield own
    own.stop()


@pytest.fixture(scope="module")
def single_broker_infra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Infra]:
    own = Infra(tmp_path_factory.mktemp("faults-single"), brokers=1)
    own.start()
    yield own
    own.stop()


@pytest.fixture
async def stack(infra: Infra) -> AsyncIterator[Stack]:
    async with running_stack(infra) as running:
        yield running


@pytest.fixture
async def single_broker_stack(single_broker_infra: Infra) -> AsyncIterator[Stack]:
    async with running_stack(single_broker_infra) as running:
        yield running
