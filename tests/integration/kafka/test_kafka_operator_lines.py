"""What operators are told by the commands against a SASL_SSL cluster with ACLs: ``rms topics
create`` as RMS's own principal (no DescribeConfigs on the cluster), and TLS settings pointed at
a plaintext listener or plaintext settings at a TLS listener, each one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from rms.devstack.kafka_broker import EmbeddedKafka
from tests.conftest import ADMIN_TOKEN
from tests.integration.kafka.test_secure_kafka import (
    ACK_TOPIC,
    PASSWORDS,
    SecureKafka,
    _assert_one_line,
    _password_file,
    _rms,
    secure_kafka,  # noqa: F401 (the module's broker)
)

pytestmark = pytest.mark.timeout(180)


def _as(cluster: SecureKafka, user: str, tmp_path: Path) -> dict[str, str]:
    return cluster.environment(user, _password_file(tmp_path, PASSWORDS[user])) | {
        "RMS_ACK_TOPIC": ACK_TOPIC}


def test_rms_topics_as_rms_needs_no_describe_configs_when_every_topic_exists(
        secure_kafka: SecureKafka, tmp_path: Path, unique: str) -> None:  # noqa: F811
    topic = f"orders.{unique}"
    made = _rms(["topics", "create", "--no-apps", topic], _as(secure_kafka, "admin", tmp_path),
                tmp_path)
    assert made.returncode == 0, made.stderr
    again = _rms(["topics", "create", "--no-apps", topic], _as(secure_kafka, "rms", tmp_path),
                 tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stderr == ""
    assert sorted(again.stdout.split()) == sorted([ACK_TOPIC, "exists", topic, "exists"])


def test_rms_topics_as_rms_names_the_missing_permission_in_one_line(
        secure_kafka: SecureKafka, tmp_path: Path, unique: str) -> None:  # noqa: F811
    result = _rms(["topics", "create", "--no-apps", f"orders.missing.{unique}"],
                  _as(secure_kafka, "rms", tmp_path), tmp_path)
    _assert_one_line(result, 1, "DescribeConfigs")
    assert "--partitions and --replication-factor" in result.stderr


@pytest.mark.parametrize("command", [["serve", "--port", "1"], ["confirm-worker"]])
def test_plaintext_settings_at_a_tls_listener_stop_start_up_with_one_line(
        secure_kafka: SecureKafka, tmp_path: Path, database_url: str,  # noqa: F811
        command: list[str]) -> None:
    env = _as(secure_kafka, "rms", tmp_path) | {
        "RMS_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "RMS_DATABASE_URL": database_url,
        "RMS_ADMIN_TOKEN": ADMIN_TOKEN}
    del env["RMS_KAFKA_SSL_CAFILE"]
    _assert_one_line(_rms(command, env, tmp_path), 2, "is a TLS listener")
    plain = {k: v for k, v in env.items() if not k.startswith("RMS_KAFKA_SASL")} | {
        "RMS_KAFKA_SECURITY_PROTOCOL": "PLAINTEXT",
        "RMS_KAFKA_BOOTSTRAP_SERVERS": secure_kafka.mtls_servers}
    _assert_one_line(_rms(command, plain, tmp_path), 2, "is a TLS listener")


@pytest.mark.parametrize("command", [["serve", "--port", "1"], ["confirm-worker"]])
def test_tls_settings_at_a_plaintext_listener_stop_start_up_with_one_line(
        secure_kafka: SecureKafka, kafka: EmbeddedKafka, tmp_path: Path,  # noqa: F811
        database_url: str, command: list[str]) -> None:
    env = _as(secure_kafka, "rms", tmp_path) | {
        "RMS_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "RMS_DATABASE_URL": database_url,
        "RMS_ADMIN_TOKEN": ADMIN_TOKEN}
    _assert_one_line(_rms(command, env, tmp_path), 2, "is a plaintext listener")
    tls_only = {k: v for k, v in env.items() if not k.startswith("RMS_KAFKA_SASL")} | {
        "RMS_KAFKA_SECURITY_PROTOCOL": "SSL"}
    _assert_one_line(_rms(command, tls_only, tmp_path), 2, "is a plaintext listener")


def test_rms_topics_at_a_listener_of_the_other_protocol_is_one_line(
        secure_kafka: SecureKafka, kafka: EmbeddedKafka, tmp_path: Path) -> None:  # noqa: F811
    tls = _as(secure_kafka, "admin", tmp_path)
    plaintext = {k: v for k, v in tls.items() if not k.startswith("RMS_KAFKA_SASL")} | {
        "RMS_KAFKA_SECURITY_PROTOCOL": "PLAINTEXT"}
    del plaintext["RMS_KAFKA_SSL_CAFILE"]
    _assert_one_line(_rms(["topics", "create", "--no-apps"], plaintext, tmp_path), 1,
                     "is a TLS listener")
    at_plaintext = tls | {"RMS_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}
    _assert_one_line(_rms(["topics", "create", "--no-apps"], at_plaintext, tmp_path), 1,
                     "is a plaintext listener")
