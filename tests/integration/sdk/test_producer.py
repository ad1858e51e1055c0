"""The producer client against the real API (in process), including lost answers and an
unreachable RMS: retries reuse the message id, so nothing is duplicated."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest

from rms_client.producer import (
    Draft,
    RetryPolicy,
    RmsConflict,
    RmsNotFound,
    RmsProducer,
    RmsUnavailable,
)
from tests.support import CHECK_PREFIX, Api, AppKeys, read_topic

FAST_RETRY = RetryPolicy(attempts=4, backoff_seconds=0.01, max_backoff_seconds=0.05)
CHECK_URL = CHECK_PREFIX + "check"


class Faulty(httpx.AsyncBaseTransport):
    """Wraps the real transport and misbehaves ``faults`` times first: ``connect`` fails before
    the request reaches RMS, ``lost`` lets RMS process it and then loses the answer, ``busy``
    answers 503 and ``late`` RMS's 408 (a body that came too late) without reaching RMS."""

    def __init__(self, inner: httpx.AsyncBaseTransport, fault: str, faults: int) -> None:
        self.inner, self.fault, self.left = inner, fault, faults
        self.forwarded = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        failing = self.left > 0
        self.left -= 1
        if failing and self.fault == "connect":
            raise httpx.ConnectError("connection refused", request=request)
        if failing and self.fault == "busy":
            return httpx.Response(503, headers={"retry-after": "0"}, request=request)
        if failing and self.fault == "late":
            return httpx.Response(408, headers={"connection": "close"}, request=request,
                                  json={"status": 408, "title": "Request timeout"})
        self.forwarded += 1
        response = await self.inner.handle_async_request(request)
        if failing and self.fault == "lost":
            await response.aread()
            raise httpx.ReadError("connection reset while reading the answer", request=request)
        return response


@pytest.fixture
async def app(api: Api, unique: str) -> AppKeys:
    return await api.create_app(f"shop-{unique}")


@contextlib.asynccontextmanager
async def producer(transport: httpx.AsyncBaseTransport, app: AppKeys
                   ) -> AsyncIterator[RmsProducer]:
    async with httpx.AsyncClient(transport=transport, base_url="http://rms.test") as client:
        yield RmsProducer(client=client, api_key=app.api_key, retry=FAST_RETRY,
                          default_check_url=CHECK_URL)


@pytest.fixture
async def rms(rms_transport: httpx.AsyncBaseTransport, app: AppKeys
              ) -> AsyncIterator[RmsProducer]:
    async with producer(rms_transport, app) as client:
        yield client


async def test_prepare_confirm_cancel_get_send(rms: RmsProducer, api: Api, topic: str) -> None:
    prepared = await rms.prepare(topic, {"order": 1}, message_id="o-1", key="c-7")
    assert (prepared.message_id, prepared.state, prepared.raw["key"]) == ("o-1", "pending-send",
                                                                          "c-7")
    assert (await rms.confirm("o-1")).state == "sent"
    assert (await rms.confirm("o-1")).state == "sent"  # idempotent
    await rms.prepare(topic, {"order": 2}, message_id="o-2")
    assert (await rms.cancel("o-2")).state == "deleted"
    assert (await rms.get("o-2")).state == "deleted"
    sent = await rms.send(topic, {"order": 3})
    assert sent.state == "sent" and len(sent.message_id) == 26
    with pytest.raises(RmsConflict, match="current state is 'deleted'"):
        await rms.confirm("o-2")
    with pytest.raises(RmsNotFound):
        await rms.get("nope")
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=2)
    assert sorted(r.value for r in records) == [b'{"order":1}', b'{"order":3}']


@pytest.mark.parametrize("fault", ["connect", "lost", "busy", "late"])
async def test_retries_reuse_the_message_id(rms_transport: httpx.AsyncBaseTransport,
                                            app: AppKeys, api: Api, topic: str,
                                            fault: str) -> None:
    flaky = Faulty(rms_transport, fault, faults=2)
    async with producer(flaky, app) as rms:
        prepared = await rms.prepare(topic, {"order": 9})
        flaky.left = 2
        confirmed = await rms.confirm(prepared.message_id)
    assert confirmed.state == "sent"
    listing = await api.client.get("/v1/admin/messages", params={"app": app.name},
                                   headers=api.admin)
    assert [m["message_id"] for m in listing.json()["items"]] == [prepared.message_id]
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1, settle=0.5)
    assert len(records) == 1


async def test_gives_up_after_the_retry_budget(rms_transport: httpx.AsyncBaseTransport,
                                               app: AppKeys, topic: str) -> None:
    down = Faulty(rms_transport, "connect", faults=100)
    async with producer(down, app) as rms:
        with pytest.raises(RmsUnavailable, match="ConnectError"):
            await rms.prepare(topic, {"order": 1})
    assert down.left == 100 - FAST_RETRY.attempts


async def test_transaction_confirms_after_the_block(rms: RmsProducer, topic: str) -> None:
    async with rms.transaction(topic, {"order": 5}, message_id="t-ok") as message:
        assert (await rms.get(message.message_id)).state == "pending-send"
    assert (await rms.get("t-ok")).state == "sent"


async def test_transaction_cancels_when_the_block_raises(rms: RmsProducer, topic: str) -> None:
    with pytest.raises(ZeroDivisionError):
        async with rms.transaction(topic, {"order": 6}, message_id="t-fail"):
            _ = 1 / 0
    assert (await rms.get("t-fail")).state == "deleted"


async def test_transaction_leaves_an_unreachable_confirm_to_check_back(
        rms_transport: httpx.AsyncBaseTransport, app: AppKeys, rms: RmsProducer,
        topic: str) -> None:
    flaky = Faulty(rms_transport, "connect", faults=0)
    async with producer(flaky, app) as cut_off, cut_off.transaction(
            topic, {"order": 7}, message_id="t-cut"):
        flaky.left = 100  # RMS becomes unreachable while the local transaction runs
    assert (await rms.get("t-cut")).state == "pending-send"  # check-back will resolve it


async def test_transaction_raises_when_rms_refuses_the_confirm(rms: RmsProducer,
                                                               topic: str) -> None:
    with pytest.raises(RmsConflict):
        async with rms.transaction(topic, {"order": 8}, message_id="t-late"):
            await rms.cancel("t-late")  # e.g. check-back resolved it as rolled back


async def test_transactional_is_the_single_message_name(rms: RmsProducer, topic: str) -> None:
    async with rms.transactional(topic, {"order": 9}, message_id="t-named") as message:
        assert message.state == "pending-send"
    assert (await rms.get("t-named")).state == "sent"


async def test_a_transaction_of_several_messages_confirms_all_in_order(
        rms: RmsProducer, api: Api, topic: str) -> None:
    drafts = [Draft(topic, {"step": n}, message_id=f"tx-ok-{n}") for n in range(3)]
    async with rms.transaction(drafts, transaction_id="tx-ok") as tx:
        assert tx.transaction_id == "tx-ok" and tx.state == "pending"
        assert tx.message_ids == ["tx-ok-0", "tx-ok-1", "tx-ok-2"]
        assert {m.state for m in tx.messages} == {"pending-send"}
    stored = await rms.get_transaction("tx-ok")
    assert stored.state == "confirmed" and {m.state for m in stored.messages} == {"sent"}
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=3, settle=0.3)
    assert [r.value for r in records] == [b'{"step":0}', b'{"step":1}', b'{"step":2}']


async def test_a_transaction_of_several_messages_cancels_all_when_the_block_raises(
        rms: RmsProducer, api: Api, topic: str) -> None:
    with pytest.raises(ZeroDivisionError):
        async with rms.transaction([Draft(topic, 1), Draft(topic, 2)]) as tx:
            _ = 1 / 0
    stored = await rms.get_transaction(tx.transaction_id)
    assert stored.state == "cancelled" and {m.state for m in stored.messages} == {"deleted"}
    assert await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1,
                            timeout=1.0) == []


async def test_a_transaction_retry_after_a_lost_answer_is_the_same_transaction(
        rms_transport: httpx.AsyncBaseTransport, app: AppKeys, api: Api, topic: str) -> None:
    flaky = Faulty(rms_transport, "lost", faults=1)
    async with producer(flaky, app) as rms:
        tx = await rms.prepare_transaction([Draft(topic, 1), Draft(topic, 2)])
        assert flaky.forwarded == 2  # the first answer was lost, the retry was answered 200
        assert (await rms.confirm_transaction(tx.transaction_id)).state == "confirmed"
    listing = await api.client.get("/v1/admin/messages", params={"app": app.name},
                                   headers=api.admin)
    # the retry stored nothing twice: the app holds exactly the transaction's two messages (the
    # listing orders by creation time, then id: members created together list in id order)
    listed = [m["message_id"] for m in listing.json()["items"]]
    assert len(listed) == 2 and sorted(listed) == sorted(tx.message_ids)


async def test_a_message_of_a_transaction_has_no_check_back_fields(rms: RmsProducer,
                                                                   topic: str) -> None:
    with pytest.raises(ValueError, match="check_url"):
        await rms.prepare_transaction([Draft(topic, 1, check_url=CHECK_URL)])
    with pytest.raises(TypeError):
        rms.transaction([Draft(topic, 1)], {"payload": "here"})  # type: ignore[call-overload]
