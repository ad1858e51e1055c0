"""API keys nobody has seen cost a bounded number of queries: the admission gate looks up at
most ``RMS_ADMISSION_UNAUTHENTICATED_LIMIT`` uncached keys at once and answers the rest 503
with ``Retry-After`` before any query, while an app's cached key is served throughout."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from rms.config import Settings
from rms.domain.models import App
from rms.store.apps import AppStore
from tests.conftest import ADMIN_TOKEN
from tests.support import Api

BOUND = 4


class CountedLookups:
    """``AppStore.by_api_key`` slowed a little, and its lookups of keys not ``known`` counted,
    concurrency included (a known key's renewal, in the background once half its time in the
    cache passed, is no unknown key's lookup: on a slow machine one runs during the flood)."""

    def __init__(self) -> None:
        self.now = self.most = self.calls = 0
        self.known: set[str] = set()
        self.original = AppStore.by_api_key

    async def lookup(self, store: AppStore, api_key: str) -> App | None:
        if api_key in self.known:
            return await self.original(store, api_key)
        self.now += 1
        self.calls += 1
        self.most = max(self.most, self.now)
        try:
            await asyncio.sleep(0.05)
            return await self.original(store, api_key)
        finally:
            self.now -= 1


@pytest.fixture
async def gated(settings: Settings, monkeypatch: pytest.MonkeyPatch
                ) -> AsyncIterator[tuple[Api, CountedLookups]]:
    from message_service.app import create_app

    counted = CountedLookups()
    async def by_api_key(store: AppStore, api_key: str) -> App | None:
        return await counted.lookup(store, api_key)

    monkeypatch.setattr(AppStore, "by_api_key", by_api_key)
    app = create_app(settings.model_copy(update={"admission_unauthenticated_limit": BOUND}))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://rms.test") as client:
            yield Api(client, ADMIN_TOKEN, settings), counted


async def test_unknown_keys_are_looked_up_within_the_bound(gated: tuple[Api, CountedLookups],
                                                          topic: str) -> None:
    api, counted = gated
    tenant = await api.create_app("tenant")
    counted.known.add(tenant.api_key)
    assert (await api.prepare(tenant, topic)).status_code == 201  # its key is cached now
    before = counted.calls

    async def stranger() -> httpx.Response:
        return await api.client.get("/v1/messages/x", headers={
            "Authorization": f"Bearer rms_s_{uuid.uuid4().hex}"})

    flood = asyncio.gather(*(stranger() for _ in range(200)))
    served = [await api.prepare(tenant, topic) for _ in range(5)]
    answers = await flood

    assert counted.most <= BOUND
    assert counted.calls - before < 200  # most strangers cost no query at all
    statuses = {response.status_code for response in answers}
    assert statuses <= {401, 503}
    refused = [r for r in answers if r.status_code == 503]
    assert refused and all(int(r.headers["retry-after"]) >= 1 for r in refused)
    assert all(r.headers["content-type"] == "application/problem+json" for r in refused)
    assert [r.status_code for r in served] == [201] * 5


async def test_a_new_apps_first_burst_costs_one_lookup_and_is_served_whole(
        gated: tuple[Api, CountedLookups], topic: str) -> None:
    api, counted = gated
    tenant = await api.create_app("tenant")
    before = counted.calls
    answers = await asyncio.gather(*(api.prepare(tenant, topic) for _ in range(50)))
    assert [r.status_code for r in answers] == [201] * 50
    assert counted.calls - before == 1  # its requests shared the one query of its key
