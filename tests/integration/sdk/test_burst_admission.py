"""A burst far above the admission gate's initial limit, from the Python producer retrying as
every SDK does (503 with ``Retry-After``), against a real ``rms serve`` at its default settings
(the gate on): every message ends confirmed and published exactly once, and no error reaches
the caller."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import httpx
import orjson
import pytest

from rms.config import Settings
from rms_client.producer import RmsProducer
from tests.conftest import ADMIN_TOKEN
from tests.integration.security.served import create_app_keys, rms_serve
from tests.support import CHECK_PREFIX, read_topic

BURST = 4 * Settings.model_fields["admission_limit"].default  # prepares at once


async def _prepare_and_confirm(producer: RmsProducer, topic: str, n: int) -> str:
    prepared = await producer.prepare(topic, {"n": n})
    confirmed = await producer.confirm(prepared.message_id)
    return confirmed.message_id


@pytest.mark.timeout(180)
async def test_a_burst_above_the_initial_limit_loses_nothing(
        settings: Settings, tmp_path: Path, topic: str, unique: str) -> None:
    with rms_serve(settings, tmp_path / "serve.log", {}) as port:
        base = f"http://127.0.0.1:{port}"
        keys = create_app_keys(base, ADMIN_TOKEN, f"burst-{unique}")
        limits = httpx.Limits(max_connections=BURST, max_keepalive_connections=BURST)
        async with (httpx.AsyncClient(base_url=base, limits=limits, timeout=30) as client,
                    RmsProducer(client=client, api_key=keys["api_key"],
                                default_check_url=CHECK_PREFIX + "check") as producer):
            confirmed = await asyncio.gather(*[_prepare_and_confirm(producer, topic, n)
                                               for n in range(BURST)])
            refused = await client.get("/metrics")
    records = await read_topic(settings.kafka_bootstrap_servers, topic, expect=BURST,
                               timeout=60, settle=1.0)
    published = Counter(orjson.loads(r.value)["n"] for r in records if r.value is not None)
    assert len(set(confirmed)) == BURST
    assert published == Counter(range(BURST)), sorted(published.items())[:10]
    # the burst did go past the limit: some of it was refused and retried
    assert _refusals(refused.text) > 0, "no refusal: the burst never reached the limit"


def _refusals(metrics: str) -> float:
    return sum(float(line.split()[-1]) for line in metrics.splitlines()
               if line.startswith("rms_admission_refused_total"))
