"""A request on a keep-alive connection the server closes before any byte of the answer is
sent once more (the SDK's producer and HTTP acker, the benchmark's client), against the real
API served over TCP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.httpclient import Pool
from rms.config import Settings
from rms_client.consumer import AckResult, HttpAcker
from rms_client.producer import RetryPolicy, RmsProducer
from tests.conftest import ADMIN_TOKEN
from tests.integration.sdk.dropping_proxy import DroppingProxy
from tests.integration.security.served import create_app_keys, served

NO_RETRY = RetryPolicy(attempts=1)


@pytest.fixture
def base_url(settings: Settings) -> Iterator[str]:
    with served(settings) as url:
        yield url


def test_the_default_keep_alive_outlives_common_client_idle_timeouts() -> None:
    """Go's net/http keeps idle connections 90 s, nginx and AWS ALB 60 s."""
    assert Settings.model_fields["http_keep_alive_seconds"].default > 90


async def test_producer_sends_once_more_on_a_dropped_connection(base_url: str,
                                                                topic: str) -> None:
    keys = create_app_keys(base_url, ADMIN_TOKEN, "producer")
    proxy = DroppingProxy(base_url, drops=1)
    async with proxy.running() as url, RmsProducer(url, keys["api_key"], retry=NO_RETRY,
                                                   default_check_url="http://127.0.0.1:1/c"
                                                   ) as producer:
        prepared = await producer.prepare(topic, {"n": 1})
        confirmed = await producer.confirm(prepared.message_id)  # its connection is dropped
    assert confirmed.state == "sent"
    assert (proxy.dropped, proxy.requests) == (1, 3)


async def test_http_acker_sends_once_more_on_a_dropped_connection(base_url: str,
                                                                  topic: str) -> None:
    keys = create_app_keys(base_url, ADMIN_TOKEN, "both")
    async with RmsProducer(base_url, keys["api_key"],
                           default_check_url="http://127.0.0.1:1/c") as producer:
        ids = [(await producer.send(topic, {"n": n})).message_id for n in range(2)]
    proxy = DroppingProxy(base_url, drops=1)
    async with proxy.running() as url:
        acker = HttpAcker(url, keys["api_key"], retries=0)
        try:
            results = [await acker.ack(message_id) for message_id in ids]
        finally:
            await acker.close()
    assert [ack.result for ack in results] == [AckResult.ACKED, AckResult.ACKED]
    assert proxy.dropped == 1


async def test_bench_client_sends_once_more_and_counts_it(base_url: str) -> None:
    proxy = DroppingProxy(base_url, drops=1)
    async with proxy.running() as url:
        pool = Pool(url, 1)
        try:
            first = await pool.request("GET", "/healthz")
            second = await pool.request("GET", "/healthz")
        finally:
            pool.close()
    assert (first.status, first.retried) == (200, False)
    assert (second.status, second.retried) == (200, True)
    assert pool.dropped_retries == 1 == proxy.dropped
