"""``rms topics create``: create the ack topic and the registered apps' concrete topics.

Configuration from the environment as for the services: ``RMS_KAFKA_BOOTSTRAP_SERVERS`` and
the other ``RMS_KAFKA_*`` connection settings (TLS, SASL: the principal needs the right to
create topics), ``RMS_ACK_TOPIC`` and, to read the apps, ``RMS_DATABASE_URL``. Exit codes: 0
every topic exists now, 1 the cluster or the database refused (a wrong password, an untrusted
certificate) or could not be reached, 2 usage or configuration error.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

from aiokafka.errors import KafkaError
from pydantic_settings import SettingsConfigDict
from sqlalchemy.exc import SQLAlchemyError

from rms.config import ConfigError, KafkaSettings, config_problem
from rms.kafka.security import kafka_security, login_problem
from rms.kafka.topics import (
    BROKER_DEFAULT,
    BrokerDefaultsUnreadable,
    TopicResult,
    concrete_topics,
    create_topics,
)
from rms_client.kafka_security import KafkaSecurityError

EXIT_REFUSED, EXIT_CONFIG = 1, 2


class TopicSettings(KafkaSettings):
    model_config = SettingsConfigDict(env_prefix="RMS_", extra="ignore", frozen=True)

    ack_topic: str = "rms.acks"
    database_url: str = "postgresql+asyncpg://postgres@127.0.0.1:5432/rms"


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    text = "create the ack topic and every wildcard-free topic apps may produce"
    create = actions.add_parser("create", help=text, description=text)
    create.add_argument("topics", nargs="*", metavar="TOPIC", help="also these topics")
    create.add_argument("--no-apps", action="store_true",
                        help="do not read the apps' topics from the database")
    create.add_argument("--partitions", type=_count, default=BROKER_DEFAULT,
                        help="partitions per new topic (default: the broker's num.partitions)")
    create.add_argument("--replication-factor", type=_count, default=BROKER_DEFAULT,
                        help="replicas per new topic (default: the broker's "
                             "default.replication.factor)")


def run(args: argparse.Namespace) -> int:
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # this command says what failed
    try:
        settings = TopicSettings()
        options = kafka_security(settings).client_options()
    except (ConfigError, KafkaSecurityError, ValueError) as exc:
        print(f"rms topics: configuration error: {config_problem(exc)}", file=sys.stderr)
        return EXIT_CONFIG
    refused = asyncio.run(login_problem(settings.kafka_bootstrap_servers, kafka_security(settings)))
    if refused is not None:
        print(f"rms topics: {refused}", file=sys.stderr)
        return EXIT_REFUSED
    try:
        results = asyncio.run(_create(settings, options, args))
    except BrokerDefaultsUnreadable as exc:
        print(f"rms topics: Kafka at {settings.kafka_bootstrap_servers}: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except (KafkaError, OSError) as exc:
        print(f"rms topics: Kafka at {settings.kafka_bootstrap_servers}: {_reason(exc)}",
              file=sys.stderr)
        return EXIT_REFUSED
    except SQLAlchemyError as exc:
        print(f"rms topics: cannot read the apps from the database: {type(exc).__name__}",
              file=sys.stderr)
        return EXIT_REFUSED
    for result in results:
        print(f"{result.topic:<40} {result.outcome}")
    return EXIT_REFUSED if any(r.outcome.startswith("failed") for r in results) else 0


def _reason(exc: BaseException) -> str:
    text = str(exc)
    return text if text.startswith(type(exc).__name__) else f"{type(exc).__name__}: {text}"


async def _create(settings: TopicSettings, options: dict[str, Any],
                  args: argparse.Namespace) -> list[TopicResult]:
    topics = {settings.ack_topic, *args.topics}
    if not args.no_apps:
        topics |= set(concrete_topics(await _app_topics(settings.database_url)))
    return await create_topics({"bootstrap_servers": settings.kafka_bootstrap_servers, **options},
                               topics,
                               partitions=args.partitions,
                               replication_factor=args.replication_factor)


async def _app_topics(database_url: str) -> list[str]:
    from rms.store.apps import AppStore
    from rms.store.database import open_engine

    engine = open_engine(database_url)
    try:
        return [topic for app in await AppStore(engine).list() for topic in app.produce_topics]
    finally:
        await engine.dispose()
