"""The wrong-key cache stays bounded however many distinct keys arrive (pure logic: the store
is a stand-in that knows no key)."""

from __future__ import annotations

import asyncio
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


class _OneKey:
    """A store that knows one key (of the app ``orders``) until it is rotated away."""

    def __init__(self) -> None:
        self.lookups = 0
        self.valid = True

    async def by_api_key(self, api_key: str) -> App | None:
        self.lookups += 1
        return cast(App, _Orders()) if self.valid and api_key == "k" else None


class _Orders:
    name = "orders"


class _Clock:
    """``time.monotonic`` of the cache, moved by the test: no dependence on the scheduler."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_key_in_use_is_renewed_before_it_expires_so_the_gate_never_loses_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr("rms.usecases.authentication.time.monotonic", clock)
    store = _OneKey()
    auth = Authentication(cast(AppStore, store), ttl=0.2)
    await auth.app_for_key("k")
    for _ in range(12):  # in use for three times its time in the cache
        clock.now += 0.05
        known, app = auth.recall("k")
        assert known and app is not None and app.name == "orders"
        for _ in range(3):  # a renewal it started runs to its end
            await asyncio.sleep(0)
    assert 2 <= store.lookups <= 8


async def test_a_renewal_that_finds_the_key_gone_forgets_it() -> None:
    store = _OneKey()
    auth = Authentication(cast(AppStore, store), ttl=0.2)
    await auth.app_for_key("k")
    store.valid = False  # rotated on another instance
    await asyncio.sleep(0.15)
    assert auth.recall("k")[0]  # still cached: the renewal starts
    await asyncio.sleep(0.02)
    assert auth.recall("k") == (True, None)  # now known to be of no app
