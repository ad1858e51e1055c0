"""The bench's Kafka clients connect as RMS does: the bootstrap servers they are given plus the
``RMS_KAFKA_*`` TLS and SASL settings of the environment (a ``--target`` cluster may require
them; the bench's own broker does not)."""

from __future__ import annotations

import os
from typing import Any

from rms.config import KafkaSettings
from rms.kafka.security import client_options

SECURITY_VARIABLES = tuple(f"RMS_{name.upper()}" for name in KafkaSettings.model_fields
                           if name != "kafka_bootstrap_servers")


def kafka_options(bootstrap: str) -> dict[str, Any]:
    return client_options(KafkaSettings(kafka_bootstrap_servers=bootstrap))


def security_environment() -> dict[str, str]:
    """The TLS and SASL variables of this process, for the bench's helper processes."""
    return {name: value for name, value in os.environ.items() if name in SECURITY_VARIABLES}
