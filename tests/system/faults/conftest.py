"""Fixtures of the fault suite: its own PostgreSQL and Kafka for the whole module (faults
crash and restart them, so never the session-shared ones), RMS processes per scenario. A
scenario runs on the three-node cluster unless it asks for ``single_broker_stack``."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.system.faults import ha
from tests.system.faults.bounds import dump_tasks
from tests.system.faults.cluster import Infra, Stack, running_stack


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


@pytest.fixture(scope="module")
def failover_infra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Infra]:
    """A single broker and a PostgreSQL that fails over (Patroni, etcd). Without Patroni or
    etcd the scenarios skip, naming what is missing; in CI (``CI=true``) they fail."""
    reason = ha.missing()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"failover scenarios cannot run: {reason}")
        pytest.skip(reason)
    base = tmp_path_factory.mktemp("faults-failover")
    own = Infra(base, brokers=1, ha=ha.PatroniCluster(base / "ha"))
    try:
        own.start()
        yield own
    finally:
        own.stop()


@pytest.fixture
async def failover_stack(failover_infra: Infra) -> AsyncIterator[Stack]:
    async with running_stack(failover_infra) as running:
        yield running


@pytest.fixture
async def stack(infra: Infra) -> AsyncIterator[Stack]:
    async with running_stack(infra) as running:
        yield running


@pytest.fixture
async def single_broker_stack(single_broker_infra: Infra) -> AsyncIterator[Stack]:
    async with running_stack(single_broker_infra) as running:
        yield running


@pytest.fixture
async def tasks_dumped_before_the_timeout(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """A scenario that hangs prints where each of its asyncio tasks waits (the harness's own
    first, each with its whole chain of awaits) 15 s before pytest-timeout ends it:
    pytest-timeout shows only the threads, and the loop's thread waits in ``select``."""
    marker = request.node.get_closest_marker("timeout")
    limit = float(marker.args[0]) if marker and marker.args else 120.0

    async def dump() -> None:
        await asyncio.sleep(max(1.0, limit - 15.0))
        dump_tasks(f"{request.node.name}: {limit - 15.0:.0f} s in")

    watcher = asyncio.create_task(dump())
    yield
    watcher.cancel()
