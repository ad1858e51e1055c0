"""Shared test infrastructure: a real PostgreSQL (embedded, private, on a free port) with a
fresh database per test cloned from a migrated template, and a real Apache Kafka broker
(Apache Kafka, KRaft) per session. Every test gets its own ack topic and consumer group."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from rms.config import Settings
from rms.devstack.embedded import EmbeddedPostgres
from rms.devstack.kafka_broker import EmbeddedKafka
from rms.devstack.kafka_broker.node import JVM_OPTIONS_VARIABLE
from rms.store.migrate import upgrade
from tests.support import Api

# every Kafka broker the suite starts (its own, the fault suite's clusters, those of rms dev and
# of the benchmark it runs) compiles with C1 alone: ready in half the time on less than half
# the CPU (rms/devstack/kafka_broker/node.py)
os.environ.setdefault(JVM_OPTIONS_VARIABLE, "-XX:TieredStopAtLevel=1")
# and so does Maven, which builds the Java client and the conformance servers in its own JVM
os.environ.setdefault("MAVEN_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

pytest_plugins = [
    "tests.tiers",
    "tests.integration.spark.fixtures",
    "tests.system.clients.fixtures",
]

# a Spark test shares its worker's one SparkSession: a time-out that interrupts it mid-call
# leaves the session's gateway unusable for every Spark test after it, so the bound of a Spark
# test (a hang detector, not a speed check) is wide enough for a machine under load
SPARK_TIMEOUT_SECONDS = 360


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("spark") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SPARK_TIMEOUT_SECONDS))


TEMPLATE_DB = "rms_template"
ADMIN_TOKEN = "test-admin-token"


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    server = EmbeddedPostgres(tmp_path_factory.mktemp("pg") / "data", fsync=False)
    server.start()
    server.create_database(TEMPLATE_DB)
    upgrade(server.url(TEMPLATE_DB))
    yield server
    server.stop("immediate")


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedKafka]:
    broker = EmbeddedKafka(tmp_path_factory.mktemp("kafka"))
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def database_url(postgres: EmbeddedPostgres) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:16]}"
    postgres.create_database(name, template=TEMPLATE_DB)
    yield postgres.url(name)
    postgres.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def unique() -> str:
    """A short unique suffix for topics, groups and app names of one test."""
    return uuid.uuid4().hex[:10]


@pytest.fixture
def settings(database_url: str, kafka: EmbeddedKafka, unique: str) -> Settings:
    return Settings(
        database_url=database_url,
        kafka_bootstrap_servers=kafka.bootstrap_servers,
        admin_token=ADMIN_TOKEN,
        allow_private_callbacks=True,
        ack_topic=f"rms.acks.{unique}",
        ack_consumer_group=f"rms-acks-{unique}",
        kafka_publish_timeout_seconds=3.0,
        db_pool_size=10,
        worker_interval_seconds=0.1,
    )


@pytest.fixture
def topic(unique: str) -> str:
    return f"orders.{unique}"


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    from message_service.app import create_app

    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://rms.test") as client:
            yield Api(client, ADMIN_TOKEN, settings)


@pytest.fixture
def tmp_dir(tmp_path: Path) -> Path:
    return tmp_path
