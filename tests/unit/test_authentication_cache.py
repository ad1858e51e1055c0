"""The wrong-key cache stays bounded however many distinct keys arrive (pure logic: the store
is a stand-in that knows no key)."""

from __future__ import annotations

from typing import cast

import pytest

from rms.domain.errors import Unauthorized
from rms.domain.models import App
from rms.store.apps import AppStore
from rms.usecases.authentication import Authentication


class _NoKeys:
    def __init__(self) -> None:
        self.lookups = 0

    async def by_api_key(self, api_key: str) -> App | None:
        self.lookups += 1
        return None


async def test_misses_are_bounded_and_the_newest_kept() -> None:
    store = _NoKeys()
    auth = Authentication(cast(AppStore, store), ttl=2.0, capacity=50, miss_ttl=60.0)
    for index in range(500):
        with pytest.raises(Unauthorized):
            await auth.app_for_key(f"k{index}")
    assert len(auth._misses) <= 50
    before = store.lookups
    with pytest.raises(Unauthorized):
        await auth.app_for_key("k499")  # the newest miss is still remembered
    assert store.lookups == before
    auth.forget()
    with pytest.raises(Unauthorized):
        await auth.app_for_key("k499")
    assert store.lookups == before + 1
