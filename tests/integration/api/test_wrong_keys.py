"""Wrong API keys are remembered for a short while (rms.usecases.authentication): a client
repeating one costs no database query per request, and a key created meanwhile works at once."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from rms.domain.models import App
from rms.store.apps import AppStore
from tests.integration.api.helpers import assert_problem
from tests.support import Api


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every API-key lookup that reaches the database (the real store, observed)."""
    seen: list[str] = []
    real = AppStore.by_api_key

    async def observed(self: AppStore, api_key: str) -> App | None:
        seen.append(api_key)
        return await real(self, api_key)

    monkeypatch.setattr(AppStore, "by_api_key", observed)
    return seen


async def _get(api: Api, key: str) -> Any:
    return await api.client.get("/v1/messages/m1", headers={"Authorization": f"Bearer {key}"})


async def test_a_repeated_wrong_key_costs_one_query_per_interval(api: Api,
                                                                 lookups: list[str]) -> None:
    started = time.monotonic()
    answers = await asyncio.gather(*(_get(api, "rms_wrong") for _ in range(200)))
    for answer in answers:
        assert_problem(answer, 401)
    elapsed = time.monotonic() - started
    assert 1 <= lookups.count("rms_wrong") <= 2 + int(elapsed), (len(lookups), elapsed)
    await asyncio.sleep(1.1)  # the miss expires: the key is looked up again
    assert_problem(await _get(api, "rms_wrong"), 401)
    assert lookups.count("rms_wrong") >= 2


async def test_a_key_created_after_misses_works_at_once(api: Api, lookups: list[str]) -> None:
    for _ in range(20):
        assert_problem(await _get(api, "rms_not_yet"), 401)
    app = await api.create_app("fresh")
    assert (await _get(api, app.api_key)).status_code == 404  # authenticated: no such message
    rotated = await api.client.post("/v1/admin/apps/fresh/rotate-key", headers=api.admin)
    new_key = rotated.json()["api_key"]
    assert (await _get(api, new_key)).status_code == 404
    assert_problem(await _get(api, app.api_key), 401)
