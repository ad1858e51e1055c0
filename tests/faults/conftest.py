"""Fixtures of the fault suite: its own PostgreSQL and broker for the whole module (faults
crash and restart them, so never the session-shared ones), RMS processes per scenario."""

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


@pytest.fixture
async def stack(infra: Infra) -> AsyncIterator[Stack]:
    async with running_stack(infra) as running:
        yield running
