"""Per-app rate limit and pending-send cap (message_service/limits.py): 429 problem documents
with Retry-After, per app, and recovery once the limit allows again."""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx

from message_service.limits import RateLimiter
from rms.domain.errors import RateLimited
from tests.integration.api.helpers import assert_problem
from tests.integration.security.conftest import ApiFactory
from tests.support import Api, AppKeys, eventually


def _retry_after(response: httpx.Response) -> int:
    value = int(response.headers["retry-after"])
    assert value >= 1
    assert response.json()["retry_after"] == value
    return value


def test_token_bucket_refills_at_the_rate() -> None:
    limiter = RateLimiter(per_second=2.0, burst=2)
    limiter.check("a", now=100.0)
    limiter.check("a", now=100.0)
    try:
        limiter.check("a", now=100.0)
    except RateLimited as exc:
        assert exc.retry_after_seconds == 1
    else:
        raise AssertionError("the third request of a burst of 2 was let through")
    limiter.check("b", now=100.0)  # another app has its own bucket
    limiter.check("a", now=100.5)  # half a second at 2/s gives one token back


async def _get(api: Api, app: AppKeys) -> httpx.Response:
    return await api.client.get("/v1/messages/none", headers=app.headers)


async def test_rate_limit_answers_429_then_recovers(api_with: ApiFactory) -> None:
    async with api_with(app_rate_limit_per_second=1.0, app_rate_limit_burst=3) as (api, _):
        noisy = await api.create_app("noisy")
        quiet = await api.create_app("quiet")
        for _ in range(3):
            assert_problem(await _get(api, noisy), 404)
        limited = await _get(api, noisy)
        body = assert_problem(limited, 429, contains="rate limit")
        assert body["type"].endswith("/rate-limited")
        wait = _retry_after(limited)
        # limited on every app-token endpoint, not on others' buckets nor on admin calls
        assert_problem(await api.prepare(noisy, "orders.x"), 429)
        assert_problem(await _get(api, quiet), 404)
        listed = await api.client.get("/v1/admin/apps", headers=api.admin)
        assert listed.status_code == 200
        # a wrong key is 401, never a 429 charged to someone
        wrong = await api.client.get("/v1/messages/none",
                                     headers={"Authorization": "Bearer rms_nope"})
        assert_problem(wrong, 401)

        await asyncio.sleep(wait)
        assert_problem(await _get(api, noisy), 404)


async def test_rate_limit_is_off_by_default(api: Api) -> None:
    app = await api.create_app("busy")
    for _ in range(150):  # more than any burst
        assert (await _get(api, app)).status_code == 404


async def test_pending_cap_refuses_prepares_until_messages_resolve(
        api_with: ApiFactory, topic: str) -> None:
    async with api_with(max_pending_per_app=3) as (api, _):
        producer = await api.create_app("producer")
        other = await api.create_app("other")
        ids = [await api.prepared_id(producer, topic) for _ in range(3)]

        refused = await api.prepare(producer, topic)
        body = assert_problem(refused, 429, contains="RMS_MAX_PENDING_PER_APP")
        assert body["pending_count"] == 3 and body["pending_cap"] == 3
        assert "3 pending-send" in body["detail"]
        _retry_after(refused)
        batch = await api.post(producer, "/v1/messages/batch", json={"messages": [
            {"topic": topic, "payload": 1, "check_url": "http://127.0.0.1:1/c"}]})
        assert_problem(batch, 429)
        # not capped: other apps, one-shot sends, confirms and cancels
        assert (await api.prepare(other, topic)).status_code == 201
        send = await api.post(producer, "/v1/messages/send", json={
            "topic": topic, "payload": 1, "check_url": "http://127.0.0.1:1/c"})
        assert send.status_code == 201, send.text
        assert (await api.post(producer, f"/v1/messages/{ids[0]}/cancel")).status_code == 200
        assert (await api.post(producer, f"/v1/messages/{ids[1]}/confirm")).status_code == 200

        async def admitted() -> bool:
            return (await api.prepare(producer, topic)).status_code == 201

        await eventually(admitted, timeout=10.0, interval=0.2)
        listed = await api.client.get("/v1/admin/messages", headers=api.admin,
                                      params={"app": "producer", "state": "pending-send"})
        assert len(listed.json()["items"]) == 2


async def test_pending_cap_zero_means_no_cap(api_with: ApiFactory, topic: str) -> None:
    async with api_with(max_pending_per_app=0) as (api, _):
        producer = await api.create_app("producer")
        items = [{"topic": topic, "payload": n, "check_url": "http://127.0.0.1:1/c"}
                 for n in range(20)]
        response = await api.post(producer, "/v1/messages/batch", json={"messages": items})
        assert response.status_code == 201, response.text
        assert (await api.prepare(producer, topic)).status_code == 201


async def test_pending_cap_is_exact_under_concurrent_prepares(api_with: ApiFactory,
                                                              topic: str) -> None:
    """Cap 50, 200 concurrent prepares in one process, before and across a refresh of the
    count: exactly 50 are admitted. Repeated prepares (200) and 409s hold no place. The
    concurrency gate is off here: it would refuse each burst of 100 simultaneous prepares
    beyond its limit (64) with 503 before the cap sees them, and the cap's exactness under
    concurrency is what is measured (test_burst_admission covers such a burst with the gate)."""
    async with api_with(max_pending_per_app=50, admission_enabled=False) as (api, _):
        producer = await api.create_app("producer")
        first = await api.prepared_id(producer, topic, message_id="first")
        for _ in range(5):  # repeats of a stored message: answered 200, create nothing
            again = await api.prepare(producer, topic, message_id="first")
            assert again.status_code == 200, again.text
        conflict = await api.prepare(producer, topic, message_id="first", payload={"other": 1})
        assert conflict.status_code == 409, conflict.text

        answers = await asyncio.gather(*(api.prepare(producer, topic) for _ in range(100)))
        await asyncio.sleep(1.2)  # the count is read again meanwhile
        answers += await asyncio.gather(*(api.prepare(producer, topic) for _ in range(100)))
        batch_items = [{"topic": topic, "payload": n, "check_url": "http://127.0.0.1:1/c"}
                       for n in range(2)]
        batch = await api.post(producer, "/v1/messages/batch", json={"messages": batch_items})

        statuses = Counter(a.status_code for a in answers)
        assert statuses == {201: 49, 429: 151}, statuses  # 49 + "first" = the cap
        assert_problem(batch, 429)  # a batch that would pass the cap is refused whole
        listed = await api.client.get("/v1/admin/stats", headers=api.admin)
        assert listed.json()["totals"]["pending-send"] == 50
        assert first == "first"


async def test_pending_cap_counts_the_messages_of_a_transaction(
        api_with: ApiFactory, topic: str) -> None:
    async with api_with(max_pending_per_app=3) as (api, _):
        producer = await api.create_app("producer")
        items = [{"topic": topic, "payload": n} for n in range(2)]
        first = await api.post(producer, "/v1/transactions",
                               json={"check_url": "http://127.0.0.1:1/c", "messages": items})
        assert first.status_code == 201, first.text
        refused = await api.post(producer, "/v1/transactions",
                                 json={"check_url": "http://127.0.0.1:1/c", "messages": items})
        body = assert_problem(refused, 429, contains="RMS_MAX_PENDING_PER_APP")
        assert body["pending_cap"] == 3
        transaction_id = first.json()["transaction_id"]
        cancelled = await api.post(producer, f"/v1/transactions/{transaction_id}/cancel")
        assert cancelled.status_code == 200

        async def admitted() -> bool:
            again = await api.post(producer, "/v1/transactions",
                                   json={"check_url": "http://127.0.0.1:1/c",
                                         "messages": items})
            return again.status_code == 201

        await eventually(admitted, timeout=10.0, interval=0.2)
