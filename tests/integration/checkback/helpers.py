"""Helpers of the confirm-service tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from rms.domain.checkback import Action
from rms.domain.models import Message
from rms.store.checkback import Answer, CheckBackStore, Resolution
from rms.store.messages import MessageStore
from rms.usecases.checkback import CheckBackWorker
from tests.support import Api, AppKeys

FAST = {"check_after_seconds": 0.05}


async def drive(worker: CheckBackWorker, until: Callable[[], Awaitable[bool]],
                timeout: float = 20.0, interval: float = 0.05) -> None:
    """Tick ``worker`` (as its scheduler would) until ``until()`` holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await worker.tick()
        if await until():
            return
        await asyncio.sleep(interval)
    raise AssertionError(f"not settled within {timeout}s")


async def message(api: Api, app: AppKeys, message_id: str) -> dict[str, Any]:
    response = await api.client.get(f"/v1/messages/{message_id}", headers=app.headers)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


async def events(api: Api, app: AppKeys, message_id: str) -> list[dict[str, Any]]:
    response = await api.client.get(f"/v1/messages/{message_id}/events", headers=app.headers)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["events"]
    return found


def settled(found: dict[str, Any]) -> bool:
    """No further check will happen: resolved, or flagged dead."""
    return bool(found["state"] != "pending-send" or found["dead"])


async def all_settled(api: Api, app: AppKeys, message_ids: list[str]) -> bool:
    return all([settled(await message(api, app, m)) for m in message_ids])


async def prepare_many(api: Api, app: AppKeys, topic: str, count: int, check_url: str,
                       **fields: Any) -> list[str]:
    """``count`` pending-send messages through the batch endpoint; returns their ids."""
    ids: list[str] = []
    for start in range(0, count, 1000):
        items = [{"topic": topic, "payload": {"n": n}, "check_url": check_url} | fields
                 for n in range(start, min(count, start + 1000))]
        response = await api.post(app, "/v1/messages/batch", json={"messages": items})
        assert response.status_code == 201, response.text
        ids += [m["message_id"] for m in response.json()["messages"]]
    return ids


async def record_answer(engine: AsyncEngine, message: Message, token: str, actor: str,
                        action: Action, answer: Answer) -> Message | None:
    """Record one answer for a message claimed under ``token``; the stored message after the
    change, or None when the claim was lost."""
    [resolved] = await CheckBackStore(engine).resolve_many(
        [Resolution(message.message_id, token, actor, action, answer)])
    if not resolved.applied:
        return None
    return resolved.sent or await MessageStore(engine).get(message.message_id)
