"""Fixtures of the Kafka tests: a broker that does not create topics on first use (the
production setting) and an API publishing to it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from rms.config import Settings
from rms.devstack.kafka_broker import EmbeddedKafka
from tests.conftest import ADMIN_TOKEN
from tests.support import Api


@pytest.fixture(scope="module")
def strict_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedKafka]:
    broker = EmbeddedKafka(tmp_path_factory.mktemp("strict-kafka"), auto_create_topics=False)
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
async def strict_api(settings: Settings, strict_broker: EmbeddedKafka) -> AsyncIterator[Api]:
    from message_service.app import create_app

    local = settings.model_copy(update={
        "kafka_bootstrap_servers": strict_broker.bootstrap_servers,
        "kafka_publish_timeout_seconds": 2.0, "publish_retry_seconds": 0.5,
        "ack_consumer_enabled": False})
    app = create_app(local)
    async with (app.router.lifespan_context(app),
                httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                  base_url="http://rms.test") as client):
        yield Api(client, ADMIN_TOKEN, local)
