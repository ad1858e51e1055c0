"""Creating RMS's topics on a Kafka cluster whose brokers do not create topics on first use
(``auto.create.topics.enable=false``, the production setting).

RMS never creates a topic as a side effect of a publish: a confirm to a topic the cluster lacks
is answered 200 (the message is durably ``sent``), its publish fails with reason
``topic-missing`` and is retried every ``RMS_PUBLISH_RETRY_SECONDS`` without spending the
delivery budget, and operators see it in metrics, stats and the dashboard. ``rms topics create``
creates the ack topic and every concrete (wildcard-free) topic the registered apps may produce,
with partitions and replication from the options or the cluster's defaults.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import TopicAlreadyExistsError, for_code

BROKER_DEFAULT = -1  # take the broker's num.partitions / default.replication.factor


@dataclass(frozen=True)
class TopicResult:
    topic: str
    outcome: str  # created | exists | failed: <error>


def concrete_topics(patterns: Iterable[str]) -> list[str]:
    """The patterns that name exactly one topic (no ``*``)."""
    return sorted({p for p in patterns if "*" not in p})


async def create_topics(client_options: dict[str, Any], topics: Iterable[str], *,
                        partitions: int = BROKER_DEFAULT,
                        replication_factor: int = BROKER_DEFAULT) -> list[TopicResult]:
    """``client_options``: the bootstrap servers and connection options
    (:func:`rms.kafka.security.client_options`)."""
    admin = AIOKafkaAdminClient(**client_options, client_id="rms-topics")
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        results = [TopicResult(t, "exists") for t in sorted(set(topics)) if t in existing]
        missing = set(topics) - existing
        if missing and BROKER_DEFAULT in (partitions, replication_factor):
            defaults = await _broker_defaults(admin)
            partitions = defaults[0] if partitions == BROKER_DEFAULT else partitions
            if replication_factor == BROKER_DEFAULT:
                replication_factor = defaults[1]
        for topic in sorted(missing):
            results.append(await _create(admin, topic, partitions, replication_factor))
        return sorted(results, key=lambda r: r.topic)
    finally:
        await admin.close()


async def _broker_defaults(admin: AIOKafkaAdminClient) -> tuple[int, int]:
    """``num.partitions`` and ``default.replication.factor`` of one broker of the cluster."""
    cluster = await admin.describe_cluster()
    broker = str(cluster["brokers"][0]["node_id"])
    names = ("num.partitions", "default.replication.factor")
    answers = await admin.describe_configs(
        [ConfigResource(ConfigResourceType.BROKER, broker, dict.fromkeys(names))])
    values = {entry[0]: entry[1] for resource in answers[0].resources for entry in resource[4]}
    try:
        return int(values["num.partitions"]), int(values["default.replication.factor"])
    except (KeyError, TypeError, ValueError):
        codes = {resource[0] for resource in answers[0].resources} - {0}
        raise BrokerDefaultsUnreadable(next(iter(codes), None)) from None


class BrokerDefaultsUnreadable(Exception):
    """The cluster did not tell its defaults for new topics (``num.partitions``,
    ``default.replication.factor``): the principal lacks DescribeConfigs on the cluster."""

    def __init__(self, error_code: int | None) -> None:
        reason = "" if error_code is None else f" ({_error_name(error_code)})"
        super().__init__(
            f"the cluster did not tell its defaults for new topics{reason}: the principal needs "
            "DescribeConfigs on the cluster, or pass --partitions and --replication-factor")


def _error_name(code: int) -> str:
    name: str = for_code(code).__name__
    return name


async def _create(admin: AIOKafkaAdminClient, topic: str, partitions: int,
                  replication_factor: int) -> TopicResult:
    try:
        response = await admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor)])
    except TopicAlreadyExistsError:
        return TopicResult(topic, "exists")
    for name, code, *rest in response.topic_errors:
        if code == TopicAlreadyExistsError.errno:
            return TopicResult(name, "exists")
        if code != 0:
            message = rest[0] if rest and rest[0] else f"error code {code}"
            return TopicResult(name, f"failed: {message}")
    return TopicResult(topic, "created")
