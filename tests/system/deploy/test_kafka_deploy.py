"""deploy/ runs the Kafka that is tested: the same version, the broker settings RMS depends on,
and ``deploy/kafka/create-topics.sh`` run against a real three-node KRaft cluster."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rms.config import Settings
from rms.devstack.kafka_broker import KafkaCluster, kafka_classpath, kafka_version
from rms.devstack.kafka_broker.install import java_binary

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
COMPOSE = DEPLOY / "compose" / "compose.yaml"
KAFKA_DEFAULT_MESSAGE_MAX_BYTES = 1048588
RECORD_OVERHEAD_BYTES = 16 * 1024  # key, RMS headers and batch framing, generously


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def test_every_kafka_image_in_deploy_is_the_tested_version() -> None:
    images = {m for path in DEPLOY.rglob("*") if path.suffix in {".yaml", ".yml", ".md"}
              for m in re.findall(r"apache/kafka:([\w.\-]+)", path.read_text())}
    assert images == {kafka_version()}


def test_compose_brokers_have_the_settings_rms_relies_on() -> None:
    brokers = {name: service for name, service in _compose()["services"].items()
               if name.startswith("kafka-") and name != "kafka-init"}
    assert len(brokers) == 3
    for service in brokers.values():
        env = {k: str(v) for k, v in service["environment"].items()}
        assert env["KAFKA_DEFAULT_REPLICATION_FACTOR"] == "3"
        assert env["KAFKA_MIN_INSYNC_REPLICAS"] == "2"
        assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
        assert env["KAFKA_UNCLEAN_LEADER_ELECTION_ENABLE"] == "false"
        assert env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == "2"
        max_bytes = int(env.get("KAFKA_MESSAGE_MAX_BYTES", KAFKA_DEFAULT_MESSAGE_MAX_BYTES))
        largest_record = Settings.model_fields["max_payload_bytes"].default + RECORD_OVERHEAD_BYTES
        assert largest_record <= max_bytes


def test_rms_in_compose_publishes_with_acks_all_and_idempotence() -> None:
    rms_env = {k: str(v) for k, v in _compose()["x-rms-environment"].items()}
    assert rms_env.get("RMS_KAFKA_ACKS", "all") == "all"
    assert rms_env["RMS_KAFKA_ENABLE_IDEMPOTENCE"] == "true"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    nodes = KafkaCluster(tmp_path_factory.mktemp("deploy-kafka"), size=3,
                         auto_create_topics=False)
    nodes.start()
    yield nodes
    nodes.stop()


@pytest.fixture
def kafka_bin(tmp_path: Path) -> Path:
    """``kafka-topics.sh`` as the Kafka distribution has it, on the tested Kafka's class path."""
    script = tmp_path / "kafka-topics.sh"
    script.write_text(f"#!/bin/sh\nexec {java_binary()} -Xmx256m -cp '{kafka_classpath()}' "
                      "org.apache.kafka.tools.TopicCommand \"$@\"\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return tmp_path


def _create_topics(cluster: KafkaCluster, kafka_bin: Path, topics: str) -> str:
    env = os.environ | {"BOOTSTRAP_SERVERS": cluster.bootstrap_servers, "TOPICS": topics,
                        "TOPIC_PARTITIONS": "3", "KAFKA_BIN": str(kafka_bin)}
    done = subprocess.run(["bash", str(DEPLOY / "kafka" / "create-topics.sh")], env=env,
                          capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.timeout(300)
def test_create_topics_script_on_a_real_cluster(cluster: KafkaCluster, kafka_bin: Path) -> None:
    first = _create_topics(cluster, kafka_bin, "rms.acks orders.paid")
    again = _create_topics(cluster, kafka_bin, "rms.acks orders.paid")  # safe to run again

    for output in (first, again):
        lines = [line for line in output.splitlines() if line.startswith("Topic:")]
        assert len(lines) == 2, output
        for line in lines:
            assert "PartitionCount: 3" in line
            assert "ReplicationFactor: 3" in line
            assert "min.insync.replicas=2" in line
            assert "unclean.leader.election.enable=false" in line
    assert cluster.leader("orders.paid") in {1, 2, 3}
