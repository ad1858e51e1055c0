"""Deployment configuration, read once where a process starts (never deep in library code).

Every field maps to an environment variable with the ``RMS_`` prefix, e.g.
``database_url`` is ``RMS_DATABASE_URL``. The README has the full table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from rms.domain.policy import DeliveryPolicy


class ConfigError(ValueError):
    """The configuration cannot run safely (e.g. no admin token outside dev mode)."""


_KAFKA_SECURITY_FIELDS = frozenset({
    "kafka_ssl_cafile", "kafka_ssl_certfile", "kafka_ssl_keyfile", "kafka_sasl_mechanism",
    "kafka_sasl_username", "kafka_sasl_password", "kafka_sasl_password_file"})


class KafkaSettings(BaseSettings):
    """Where the Kafka cluster is and how every Kafka client of RMS connects to it: TLS and
    SASL (:mod:`rms.kafka.security` turns these into client options). The SASL password may
    come from a file instead (compose secrets, systemd credentials, mounted Secrets)."""

    model_config = SettingsConfigDict(env_prefix="RMS_", extra="ignore", frozen=True)

    kafka_bootstrap_servers: str = "127.0.0.1:9092"
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    kafka_ssl_cafile: str | None = None
    kafka_ssl_certfile: str | None = None
    kafka_ssl_keyfile: str | None = None
    kafka_ssl_check_hostname: bool = True
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    kafka_sasl_username: str | None = None
    kafka_sasl_password: SecretStr | None = None
    kafka_sasl_password_file: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _password_from_file(cls, data: Any) -> Any:
        """An empty TLS or SASL value is unset (a deployment template may carry it empty); the
        password file, when named, is read now."""
        if not isinstance(data, dict):
            return data
        data = {key: value for key, value in data.items()
                if not (key in _KAFKA_SECURITY_FIELDS and value == "")}
        if not data.get("kafka_sasl_password_file"):
            return data
        if data.get("kafka_sasl_password"):
            raise ConfigError("set RMS_KAFKA_SASL_PASSWORD or RMS_KAFKA_SASL_PASSWORD_FILE, "
                              "not both")
        path = Path(str(data["kafka_sasl_password_file"]))
        try:
            password = path.read_text().rstrip("\r\n")
        except OSError as exc:
            raise ConfigError(f"RMS_KAFKA_SASL_PASSWORD_FILE: cannot read {path}: "
                              f"{exc.strerror or type(exc).__name__}") from None
        return {**data, "kafka_sasl_password": password}


class WorkerSettings(KafkaSettings):
    """What every RMS process reads: connections, the deployment's security mode, the delivery
    policy, the workers' knobs and observability; the workers read only these. Defaults are
    the design's recommendations (design section 7)."""

    model_config = SettingsConfigDict(env_prefix="RMS_", extra="ignore", frozen=True)

    # Connections
    database_url: str = "postgresql+asyncpg://postgres@127.0.0.1:5432/rms"
    db_pool_size: int = Field(default=20, ge=1)
    db_max_overflow: int = Field(default=10, ge=0)
    db_pool_timeout_seconds: float = Field(default=5.0, gt=0)
    db_idle_in_transaction_timeout_seconds: float = Field(default=60.0, ge=0)
    kafka_acks: Literal["all", "1", "0"] = "all"
    # the idempotent producer: a send retried after a lost answer or a leader change is written
    # once (Kafka deduplicates by producer id and sequence); it requires acks=all
    kafka_enable_idempotence: bool = True
    kafka_linger_ms: int = Field(default=2, ge=0)
    kafka_publish_timeout_seconds: float = Field(default=5.0, gt=0)
    kafka_client_id: str = "rms"

    # check URLs on private addresses (the check-back calls and the prepare's validation)
    allow_private_callbacks: bool = False

    # Policy defaults (per message overrides come in the prepare body)
    check_after_seconds: float = Field(default=10.0, ge=0)
    max_checks: int = Field(default=15, ge=1)
    check_backoff_cap_seconds: float = Field(default=300.0, gt=0)
    ack_timeout_seconds: float = Field(default=60.0, gt=0)
    max_deliveries: int = Field(default=6, ge=1)
    delivery_backoff_cap_seconds: float = Field(default=1800.0, gt=0)
    publish_retry_seconds: float = Field(default=5.0, gt=0)

    # Workers
    worker_interval_seconds: float = Field(default=1.0, gt=0)
    worker_batch_size: int = Field(default=200, ge=1)
    worker_lease_seconds: float = Field(default=30.0, gt=0)
    worker_concurrency: int = Field(default=64, ge=1)
    callback_timeout_seconds: float = Field(default=5.0, gt=0)
    callback_max_response_bytes: int = Field(default=64 * 1024, ge=1)

    # Observability
    log_level: str = "INFO"
    log_json: bool = True

    @model_validator(mode="after")
    def _idempotence_needs_all_acks(self) -> WorkerSettings:
        if self.kafka_enable_idempotence and self.kafka_acks != "all":
            raise ConfigError("RMS_KAFKA_ENABLE_IDEMPOTENCE=true needs RMS_KAFKA_ACKS=all "
                              "(or set RMS_KAFKA_ENABLE_IDEMPOTENCE=false)")
        return self

    @property
    def policy(self) -> DeliveryPolicy:
        """The deployment-wide default policy for new messages."""
        return DeliveryPolicy(
            check_after_seconds=self.check_after_seconds,
            max_checks=self.max_checks,
            check_backoff_cap_seconds=self.check_backoff_cap_seconds,
            ack_timeout_seconds=self.ack_timeout_seconds,
            max_deliveries=self.max_deliveries,
            delivery_backoff_cap_seconds=self.delivery_backoff_cap_seconds,
        )


class RetentionSettings(BaseSettings):
    """What ``rms retention run`` reads when no option overrides it: finished messages older
    than ``retention_older_than`` (``30d``, ``12h``, ...) leave the hot tables in batches of at
    most ``retention_batch_size``, archived first to ``retention_archive_dir`` when it is set,
    paced by ``retention_duty_cycle`` and ``retention_batch_seconds``."""

    model_config = SettingsConfigDict(env_prefix="RMS_", extra="ignore", frozen=True)

    retention_older_than: str = Field(default="30d", pattern=r"^\s*\d+(\.\d+)?\s*[smhd]\s*$")
    retention_batch_size: int = Field(default=5000, ge=1)
    retention_pause_seconds: float = Field(default=0.0, ge=0)
    # the pace that yields to the request path (history.pacing): work at most this share of
    # the wall time, in batches of about this many seconds
    retention_duty_cycle: float = Field(default=0.25, gt=0, le=1)
    retention_batch_seconds: float = Field(default=0.25, gt=0)
    retention_archive_dir: str | None = None
    # permission bits of the archive's files (octal; folders add the search bit where the
    # files can be read): owner-only by default, since archived messages hold full payloads
    retention_archive_file_mode: str = Field(default="0600", pattern=r"^0?[0-7]{3}$")


class Settings(WorkerSettings, RetentionSettings):
    """All RMS settings: the workers' plus what the API reads (the ack consumer, the limits,
    the HTTP server, the report folder) and the retention job's."""

    # Security: the API refuses to start without the admin token outside dev mode (the
    # workers serve no admin endpoint and do not read it)
    admin_token: str | None = None
    dev_mode: bool = False

    ack_topic: str = "rms.acks"
    ack_consumer_enabled: bool = True
    ack_consumer_group: str = "rms-ack-consumer"
    ack_consumer_max_wait_ms: int = Field(default=50, ge=1)
    # tries of an ack-topic batch that fails while PostgreSQL answers, before it is applied
    # record by record and what still fails is set aside (an outage is retried without limit)
    ack_batch_max_tries: int = Field(default=5, ge=1)
    # ack records must carry the consumer app's Standard Webhooks signature; "optional" accepts
    # unsigned ones (still refusing a wrong signature) where Kafka ACLs guard the ack topic
    ack_signatures: Literal["required", "optional"] = "required"

    # when a producer's confirm (POST /v1/messages/{id}/confirm) is answered: "published",
    # once the broker's answer to its first publish is recorded (the answer states it);
    # "committed", once the confirming statement is durable, the publish following on the
    # dispatcher (the answer states the delivery reserved; design section 4)
    confirm_answer: Literal["published", "committed"] = "published"

    # Limits
    max_payload_bytes: int = Field(default=256 * 1024, ge=1)
    max_headers: int = Field(default=64, ge=0)
    max_header_bytes: int = Field(default=8 * 1024, ge=1)
    max_batch_items: int = Field(default=1000, ge=1)
    max_batch_bytes: int = Field(default=8 * 1024 * 1024, ge=1)
    # the furthest a prepare or send may delay its delivery (deliver_after / delay_seconds)
    max_delay_seconds: float = Field(default=7 * 86_400.0, ge=0)
    # per app and per API process (message_service/limits.py); 0 turns each off
    app_rate_limit_per_second: float = Field(default=0.0, ge=0)
    app_rate_limit_burst: int = Field(default=100, ge=1)
    max_pending_per_app: int = Field(default=100_000, ge=0)
    # HTTP server (rms serve): connections held at once (the oldest idle one makes room for a
    # new one; when all are busy, 503 beyond but to health checks, which have a reserve above
    # it: message_service/connections.py), idle keep-alive, and how long a request head and a
    # request body may take to arrive (408 beyond)
    http_limit_concurrency: int = Field(default=1000, ge=1)
    http_health_reserve: int = Field(default=16, ge=0)
    # longer than the idle timeouts of the clients and proxies in front (Go 90 s, nginx and
    # AWS ALB 60 s): the client, not the server, must be the one to drop an idle connection
    http_keep_alive_seconds: float = Field(default=120.0, gt=0)
    # the idle keep-alive of a connection that has not shown an app's API key
    http_unauthenticated_keep_alive_seconds: float = Field(default=5.0, gt=0)
    http_head_timeout_seconds: float = Field(default=10.0, gt=0)
    http_body_timeout_seconds: float = Field(default=30.0, gt=0)
    # adaptive concurrency limit of the producer and consumer API (message_service/
    # admission.py), on unless switched off: requests in flight beyond the limit get 503 with
    # Retry-After at once, an app over its fair share first; the limit follows measured
    # latency and event-loop lag between its minimum and maximum
    admission_enabled: bool = True
    admission_initial_limit: int = Field(default=64, ge=1)
    admission_min_limit: int = Field(default=8, ge=1)
    admission_max_limit: int = Field(default=1000, ge=1)
    admission_tolerance: float = Field(default=1.5, ge=1.0)
    admission_latency_floor_seconds: float = Field(default=0.05, ge=0)
    admission_latency_ceiling_seconds: float = Field(default=0.25, gt=0)
    admission_lag_budget_seconds: float = Field(default=0.01, gt=0)
    # requests in flight whose key the database could not look up, held apart from the limit
    admission_unauthenticated_limit: int = Field(default=8, ge=1)
    # how long a rotated-out signing secret still signs check-backs next to the new one
    signing_secret_overlap_seconds: float = Field(default=86_400.0, ge=0)

    # Reports: where `rms report` writes (the dashboard serves the latest summary.json from it)
    report_dir: str | None = None

    @model_validator(mode="after")
    def _admin_token_required_outside_dev(self) -> Settings:
        if not self.dev_mode and not self.admin_token:
            raise ConfigError(
                "RMS_ADMIN_TOKEN is required outside dev mode (set RMS_DEV_MODE=true for a "
                "local trial only)"
            )
        if self.admin_token is not None and len(self.admin_token) < 8 and not self.dev_mode:
            raise ConfigError("RMS_ADMIN_TOKEN must be at least 8 characters")
        return self

    @model_validator(mode="after")
    def _admission_limits_in_order(self) -> Settings:
        if not (self.admission_min_limit <= self.admission_initial_limit
                <= self.admission_max_limit):
            raise ConfigError("RMS_ADMISSION_MIN_LIMIT <= RMS_ADMISSION_INITIAL_LIMIT <= "
                              "RMS_ADMISSION_MAX_LIMIT must hold")
        if self.admission_latency_floor_seconds > self.admission_latency_ceiling_seconds:
            raise ConfigError("RMS_ADMISSION_LATENCY_FLOOR_SECONDS must not exceed "
                              "RMS_ADMISSION_LATENCY_CEILING_SECONDS")
        return self


def config_problem(exc: Exception) -> str:
    """What is wrong with the configuration, one clause per setting, naming the variable and
    never repeating its value (it may be a secret)."""
    if not isinstance(exc, ValidationError):
        return str(exc)
    clauses = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        message = str(error["msg"]).removeprefix("Value error, ")
        field = error["loc"][0] if error["loc"] else None
        clauses.append(f"RMS_{str(field).upper()}: {message}" if field else message)
    return "; ".join(clauses)
