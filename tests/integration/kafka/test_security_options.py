"""The one home of Kafka's TLS and SASL options: what the RMS_KAFKA_* settings become, and the
combinations refused before any connection (pure logic)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from pydantic import ValidationError

from rms.config import ConfigError, KafkaSettings, WorkerSettings, config_problem
from rms.kafka.publisher import producer_options
from rms.kafka.security import client_options, kafka_security
from rms_client.kafka_security import KafkaSecurity, KafkaSecurityError
from tests.tls_support import Authority


def test_plaintext_by_default() -> None:
    assert client_options(KafkaSettings()) == {"bootstrap_servers": "127.0.0.1:9092",
                                               "security_protocol": "PLAINTEXT"}


def test_sasl_ssl_becomes_aiokafka_options(tmp_path: Path) -> None:
    authority = Authority(tmp_path)
    client = authority.client("rms")
    settings = WorkerSettings(
        kafka_bootstrap_servers="broker-1:9093", kafka_security_protocol="SASL_SSL",
        kafka_ssl_cafile=str(authority.cafile), kafka_ssl_certfile=str(client.cert),
        kafka_ssl_keyfile=str(client.key), kafka_ssl_check_hostname=False,
        kafka_sasl_mechanism="SCRAM-SHA-256", kafka_sasl_username="rms",
        kafka_sasl_password="s3cret-pw")
    options = producer_options(settings)  # the publisher's, as every client's
    context = options.pop("ssl_context")
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname is False
    assert options["security_protocol"] == "SASL_SSL"
    assert options["sasl_mechanism"] == "SCRAM-SHA-256"
    assert options["sasl_plain_username"] == "rms"
    assert options["sasl_plain_password"] == "s3cret-pw"
    assert options["bootstrap_servers"] == "broker-1:9093"


@pytest.mark.parametrize(("choices", "says"), [
    ({"security_protocol": "SASL_SSL"}, "needs a SASL mechanism"),
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "sasl_username": "rms"},
     "needs a user name and a password"),
    ({"security_protocol": "SSL", "ssl_certfile": "c.pem"}, "needs its key"),
    ({"ssl_cafile": "ca.pem"}, "security protocol is PLAINTEXT"),
    ({"security_protocol": "SSL", "sasl_mechanism": "PLAIN"}, "security protocol is SSL"),
    ({"security_protocol": "TLS"}, "must be one of"),
])
def test_combinations_that_cannot_work_are_refused(choices: dict[str, str], says: str) -> None:
    with pytest.raises(KafkaSecurityError, match=says):
        KafkaSecurity(**choices)  # type: ignore[arg-type]


def test_a_missing_ca_file_is_a_configuration_error(tmp_path: Path) -> None:
    security = KafkaSecurity("SSL", ssl_cafile=str(tmp_path / "absent.pem"))
    with pytest.raises(KafkaSecurityError, match="cannot load the TLS files"):
        security.client_options()


def test_the_password_may_come_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("from-a-file\n")
    settings = KafkaSettings(kafka_sasl_password_file=str(secret))
    assert settings.kafka_sasl_password is not None
    assert settings.kafka_sasl_password.get_secret_value() == "from-a-file"
    with pytest.raises((ConfigError, ValidationError), match="not both"):
        KafkaSettings(kafka_sasl_password_file=str(secret), kafka_sasl_password="other")
    with pytest.raises(ValidationError) as missing:
        KafkaSettings(kafka_sasl_password_file=str(tmp_path / "absent"))
    assert "RMS_KAFKA_SASL_PASSWORD_FILE: cannot read" in config_problem(missing.value)


def test_empty_values_are_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SSL_CAFILE", "SASL_MECHANISM", "SASL_USERNAME", "SASL_PASSWORD",
                 "SASL_PASSWORD_FILE"):
        monkeypatch.setenv(f"RMS_KAFKA_{name}", "")
    settings = KafkaSettings()
    assert settings.kafka_sasl_password is None and settings.kafka_ssl_cafile is None
    assert kafka_security(settings).client_options() == {"security_protocol": "PLAINTEXT"}


def test_the_password_never_appears_in_a_repr() -> None:
    settings = KafkaSettings(kafka_security_protocol="SASL_SSL", kafka_sasl_mechanism="PLAIN",
                             kafka_sasl_username="rms", kafka_sasl_password="s3cret-pw")
    assert "s3cret-pw" not in repr(settings) and "s3cret-pw" not in repr(kafka_security(settings))
    assert "s3cret-pw" not in repr(KafkaSecurity("SASL_SSL", sasl_mechanism="PLAIN",
                                                 sasl_username="rms", sasl_password="s3cret-pw"))
