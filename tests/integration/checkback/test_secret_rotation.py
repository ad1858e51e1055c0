"""Signing-secret rotation (POST /v1/admin/apps/{name}/rotate-signing-secret): during the
overlap every check-back carries the new and the previous signature and the SDK verifier
accepts either secret; after the overlap, or after a second rotation, the retired secret no
longer signs."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from confirm_service.runtime import checkback_worker
from rms.config import Settings
from rms.store.database import create_engine
from rms_client.signing import SignatureError, Verifier
from tests.integration.api.helpers import assert_problem
from tests.integration.checkback.helpers import FAST, drive
from tests.integration.checkback.servers import Call, CallbackServer
from tests.support import Api, AppKeys


async def _rotate(api: Api, app: AppKeys, **body: Any) -> dict[str, Any]:
    response = await api.client.post(f"/v1/admin/apps/{app.name}/rotate-signing-secret",
                                     json=body or None, headers=api.admin)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


async def _one_call(api: Api, app: AppKeys, server: CallbackServer, settings: Settings,
                    topic: str) -> Call:
    """Prepare a message and let the worker make its first check-back; returns that call."""
    message_id = await api.prepared_id(app, topic, check_url=server.url + "check", **FAST)

    async def called() -> bool:
        return any(call.message_id == message_id for call in server.calls)

    async with checkback_worker(settings) as worker:
        await drive(worker, called)
    return next(call for call in server.calls if call.message_id == message_id)


def _accepted(secret: str, call: Call) -> bool:
    try:
        Verifier([secret]).verify(call.headers, call.body)
    except SignatureError:
        return False
    return True


async def test_overlap_signs_with_both_then_only_the_new(
        api: Api, producer: AppKeys, server: CallbackServer, worker_settings: Settings,
        settings: Settings, topic: str) -> None:
    old = producer.signing_secret
    rotated = await _rotate(api, producer, overlap_seconds=3600)
    new = rotated["signing_secret"]
    assert new != old and new.startswith("whsec_")
    assert rotated["previous_signing_secret_expires_at"] is not None
    assert "api_key" not in rotated
    # the API key did not change; the secret is shown once (not in later reads)
    shown = await api.client.get(f"/v1/admin/apps/{producer.name}", headers=api.admin)
    assert shown.status_code == 200 and new not in shown.text and old not in shown.text
    assert shown.json()["previous_signing_secret_expires_at"] is not None

    during = await _one_call(api, producer, server, worker_settings, topic)
    assert len(during.headers["webhook-signature"].split()) == 2
    assert _accepted(old, during) and _accepted(new, during)
    Verifier([old, new]).verify(during.headers, during.body)

    # the overlap's deadline passes (moved into the past rather than waited for)
    engine = create_engine(settings, pool_size=1)
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE apps SET previous_signing_secret_expires_at = "
                                "now() - interval '1 second' WHERE name = :n"),
                           {"n": producer.name})
    await engine.dispose()
    after = await _one_call(api, producer, server, worker_settings, topic)
    assert len(after.headers["webhook-signature"].split()) == 1
    assert _accepted(new, after) and not _accepted(old, after)
    shown = await api.client.get(f"/v1/admin/apps/{producer.name}", headers=api.admin)
    assert shown.json()["previous_signing_secret_expires_at"] is None


async def test_second_rotation_retires_the_oldest_secret(
        api: Api, producer: AppKeys, server: CallbackServer, worker_settings: Settings,
        topic: str) -> None:
    first = producer.signing_secret
    second = (await _rotate(api, producer))["signing_secret"]  # default overlap
    third = (await _rotate(api, producer))["signing_secret"]
    call = await _one_call(api, producer, server, worker_settings, topic)
    assert len(call.headers["webhook-signature"].split()) == 2
    assert _accepted(third, call) and _accepted(second, call) and not _accepted(first, call)


async def test_zero_overlap_switches_at_once(
        api: Api, producer: AppKeys, server: CallbackServer, worker_settings: Settings,
        topic: str) -> None:
    old = producer.signing_secret
    rotated = await _rotate(api, producer, overlap_seconds=0)
    assert rotated["previous_signing_secret_expires_at"] is None
    call = await _one_call(api, producer, server, worker_settings, topic)
    assert _accepted(rotated["signing_secret"], call) and not _accepted(old, call)


@pytest.mark.parametrize("body", [{"overlap_seconds": -1}, {"overlap_seconds": "1"},
                                  {"overlap_seconds": 31 * 86_400}, {"other": 1}])
async def test_bad_rotation_bodies_are_422(api: Api, producer: AppKeys,
                                           body: dict[str, Any]) -> None:
    response = await api.client.post(f"/v1/admin/apps/{producer.name}/rotate-signing-secret",
                                     json=body, headers=api.admin)
    assert_problem(response, 422)


async def test_unknown_app_and_app_tokens(api: Api, producer: AppKeys) -> None:
    assert_problem(await api.client.post("/v1/admin/apps/ghost/rotate-signing-secret",
                                         headers=api.admin), 404)
    assert_problem(await api.client.post(f"/v1/admin/apps/{producer.name}/rotate-signing-secret",
                                         headers=producer.headers), 401)
