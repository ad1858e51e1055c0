"""Deployment configuration, read once where a process starts (never deep in library code).

Every field maps to an environment variable with the ``RMS_`` prefix, e.g.
``database_url`` is ``RMS_DATABASE_URL``. Each field's ``description`` is what the
configuration reference says about it (``python -m docs_gen`` writes
docs/reference/configuration.md from these definitions), so a setting is described here and
nowhere else.
"""

from __future__ import annotations

import tempfile
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

    kafka_bootstrap_servers: str = Field(default="127.0.0.1:9092", description="the Kafka cluster")
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        default="PLAINTEXT",
        description="how every Kafka client of RMS connects ([Kafka over TLS and SASL]"
                    "(../operations/security.md#kafka-over-tls-and-sasl))")
    kafka_ssl_cafile: str | None = Field(
        default=None, description="PEM file of the authorities that sign the brokers' "
                                  "certificates (none: the system's)")
    kafka_ssl_certfile: str | None = Field(
        default=None, description="PEM client certificate, for mutual TLS")
    kafka_ssl_keyfile: str | None = Field(default=None, description="its PEM key")
    kafka_ssl_check_hostname: bool = Field(
        default=True, description="the broker's certificate must name the host RMS dialled")
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        default=None, description="the SASL mechanism")
    kafka_sasl_username: str | None = Field(default=None,
                                            description="SASL user (RMS's principal)")
    kafka_sasl_password: SecretStr | None = Field(default=None,
                                                  description="its password; never logged")
    kafka_sasl_password_file: str | None = Field(
        default=None, description="a file holding the password instead (compose secrets, "
                                  "systemd credentials, mounted Secrets); not both")

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
    database_url: str = Field(
        default="postgresql+asyncpg://postgres@127.0.0.1:5432/rms",
        description="the message store (plain `postgresql://` URLs are accepted), read one way "
                    "by every command: TLS as `?sslmode=verify-full&sslrootcert=/path/ca.pem`, "
                    "a Unix socket as `postgresql+asyncpg://user@/rms?host=/run/postgresql` "
                    "([PostgreSQL over TLS](../operations/security.md#postgresql-over-tls))")
    db_pool_size: int = Field(default=20, ge=1, description="connections per process")
    db_max_overflow: int = Field(default=10, ge=0, description="extra connections under bursts")
    db_pool_timeout_seconds: float = Field(
        default=5.0, gt=0, description="wait for a connection before answering 503")
    db_idle_in_transaction_timeout_seconds: float = Field(
        default=60.0, ge=0,
        description="PostgreSQL ends an RMS session idle inside a transaction this long (its "
                    "locks are freed if the client vanished); 0 = never")
    kafka_acks: Literal["all", "1", "0"] = Field(default="all", description="producer acks")
    # Kafka deduplicates by producer id and sequence
    kafka_enable_idempotence: bool = Field(
        default=True, description="idempotent producer: a send retried after a lost answer or "
                                  "a leader change is written once (needs `RMS_KAFKA_ACKS=all`)")
    kafka_linger_ms: int = Field(default=2, ge=0, description="producer batching delay")
    kafka_publish_timeout_seconds: float = Field(
        default=5.0, gt=0, description="a publish not accepted by then counts as failed")
    kafka_client_id: str = Field(default="rms", description="Kafka client id")
    # a transaction's members due together go in one Kafka transaction (design section 4)
    kafka_transactions: bool = Field(
        default=True, description="publish the members of a transaction that a confirm "
                                  "publishes together in one Kafka transaction (else one after "
                                  "another, each on its own)")
    kafka_transactional_producers: int = Field(
        default=1, ge=1, le=64,
        description="transactional producers per confirming process (each runs one Kafka "
                    "transaction at a time)")
    kafka_transactional_id_prefix: str = Field(
        default="rms", min_length=1, pattern=r"^[A-Za-z0-9._-]+$",
        description="first part of the transactional ids "
                    "`<prefix>.<instance>.<role>.<n>`")
    kafka_transaction_timeout_seconds: float = Field(
        default=30.0, ge=1, le=900,
        description="the broker aborts a Kafka transaction left open this long (by a process "
                    "that died mid-publish); read_committed consumers of its partitions wait "
                    "at most this long")
    fault_exit_after_transaction_records: int = Field(
        default=0, ge=0,
        description="fault injection for RMS's own tests, never for production: the process "
                    "exits at once, cleaning nothing up, once the broker accepted this many "
                    "records of a transaction's publish, before the rest is committed; 0 = "
                    "never")
    instance_name: str | None = Field(
        default=None, pattern=r"^[A-Za-z0-9._-]{1,100}$",
        description="this process's stable name in its transactional ids (a pod or systemd "
                    "instance name; unique among live processes); default: host name and the "
                    "lowest free slot of this host")
    instance_slot_dir: str = Field(
        default=str(Path(tempfile.gettempdir()) / "rms-instance-slots"),
        description="where processes without `RMS_INSTANCE_NAME` lock their slot number")

    allow_private_callbacks: bool = Field(
        default=False, description="allow check-back URLs on loopback and private addresses "
                                   "(the check-back calls and the prepare's validation)")

    # Policy defaults
    check_after_seconds: float = Field(
        default=10.0, ge=0, description="first check-back after prepare (per message: the "
                                        "prepare's `check_after_seconds`)")
    max_checks: int = Field(
        default=15, ge=1, description="check-backs (all attempts) before dead `check-exhausted` "
                                      "(per message: `max_checks`)")
    check_backoff_cap_seconds: float = Field(
        default=300.0, gt=0, description="longest wait between check-backs")
    ack_timeout_seconds: float = Field(
        default=60.0, gt=0, description="wait for an ack after a publish, then doubling (per "
                                        "message: `ack_timeout_seconds`)")
    max_deliveries: int = Field(
        default=6, ge=1, description="publishes (all attempts) before dead `delivery-exhausted` "
                                     "(per message: `max_deliveries`)")
    delivery_backoff_cap_seconds: float = Field(
        default=1800.0, gt=0, description="longest wait for an ack")
    publish_retry_seconds: float = Field(
        default=5.0, gt=0, description="retry delay after the broker refused a publish (a "
                                       "refused publish never spends `max_deliveries`)")

    # Workers
    worker_interval_seconds: float = Field(
        default=1.0, gt=0, description="worker tick (fractions allowed)")
    worker_batch_size: int = Field(default=200, ge=1, description="messages claimed per tick")
    apps_repair_seconds: float = Field(
        default=5.0, gt=0,
        description="how often every process gives the apps an earlier release created, or "
                    "whose consume topics it changed, the form of their topics this release "
                    "reads (during a rolling update)")
    worker_lease_seconds: float = Field(
        default=30.0, gt=0, description="a claim not finished by then is taken again")
    worker_concurrency: int = Field(
        default=64, ge=1, description="concurrent callbacks or publishes per worker")
    callback_timeout_seconds: float = Field(
        default=5.0, gt=0, description="check-back call timeout")
    callback_max_response_bytes: int = Field(
        default=64 * 1024, ge=1, description="largest check-back answer read")

    # Observability
    log_level: str = Field(default="INFO", description="log level")
    log_json: bool = Field(default=True, description="JSON logs (else human-readable)")

    @model_validator(mode="after")
    def _idempotence_needs_all_acks(self) -> WorkerSettings:
        if self.kafka_enable_idempotence and self.kafka_acks != "all":
            raise ConfigError("RMS_KAFKA_ENABLE_IDEMPOTENCE=true needs RMS_KAFKA_ACKS=all "
                              "(or set RMS_KAFKA_ENABLE_IDEMPOTENCE=false)")
        if self.kafka_transactions and self.kafka_acks != "all":
            raise ConfigError("RMS_KAFKA_TRANSACTIONS=true needs RMS_KAFKA_ACKS=all "
                              "(or set RMS_KAFKA_TRANSACTIONS=false)")
        if (self.kafka_transactions
                and self.kafka_transaction_timeout_seconds < self.kafka_publish_timeout_seconds):
            raise ConfigError("RMS_KAFKA_TRANSACTION_TIMEOUT_SECONDS must be at least "
                              "RMS_KAFKA_PUBLISH_TIMEOUT_SECONDS")
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

    retention_older_than: str = Field(
        default="30d", pattern=r"^\s*\d+(\.\d+)?\s*[smhd]\s*$",
        description="remove finished messages this long after `done_at` / `deleted_at` "
                    "(`--older-than`; `s`, `m`, `h`, `d`)")
    retention_batch_size: int = Field(
        default=5000, ge=1,
        description="at most this many messages per delete transaction (`--batch-size`)")
    retention_pause_seconds: float = Field(
        default=0.0, ge=0, description="a fixed pause added after every batch, for replication "
                                       "lag and I/O (`--pause-seconds`)")
    # the pace that yields to the request path (history.pacing)
    retention_duty_cycle: float = Field(
        default=0.25, gt=0, le=1,
        description="the share of the time the run works: after a batch of *d* seconds it "
                    "rests *d* \u00d7 (1 \u2212 duty) / duty (`--duty-cycle`; `1` and no pause: as fast "
                    "as the database allows)")
    retention_batch_seconds: float = Field(
        default=0.25, gt=0,
        description="the time each batch aims at: a slower batch shrinks the next in "
                    "proportion (not below 100 messages), a batch under half of it lets the "
                    "next grow by half (`--batch-seconds`)")
    retention_archive_dir: str | None = Field(
        default=None, description="archive each batch to day-partitioned Parquet here first "
                                  "(`--archive`); none: delete only")
    # owner-only by default, since archived messages hold full payloads
    retention_archive_file_mode: str = Field(
        default="0600", pattern=r"^0?[0-7]{3}$",
        description="permission bits of archive files (octal); folders add the search bit "
                    "where files can be read (`0600` → `0700`, `0640` → `0750`)")


class Settings(WorkerSettings, RetentionSettings):
    """All RMS settings: the workers' plus what the API reads (the ack consumer, the limits,
    the HTTP server, the report folder) and the retention job's."""

    # Security: the API refuses to start without the admin token outside dev mode (the
    # workers serve no admin endpoint and do not read it)
    admin_token: str | None = Field(
        default=None, description="operator token; **required** by `rms serve` unless "
                                  "`RMS_DEV_MODE=true` (the workers do not read it)")
    dev_mode: bool = Field(default=False, description="local trial mode (`rms dev` sets it)")

    ack_topic: str = Field(default="rms.acks",
                           description="topic consumers may write acks to")
    ack_consumer_enabled: bool = Field(
        default=True, description="run the ack-topic consumer in the API process")
    ack_consumer_group: str = Field(default="rms-ack-consumer",
                                    description="its consumer group")
    ack_consumer_max_wait_ms: int = Field(
        default=50, ge=1, description="longest an ack-topic fetch waits for new records (an "
                                      "ack that arrives meanwhile can wait that long)")
    ack_batch_max_tries: int = Field(
        default=5, ge=1,
        description="tries of an ack-topic batch that fails while PostgreSQL answers, before "
                    "it is applied record by record and what still fails is set aside (an "
                    "outage is waited out, never skipped)")
    ack_signatures: Literal["required", "optional"] = Field(
        default="required",
        description="ack records must carry the Standard Webhooks signature of the consumer "
                    "app they name (`optional`: unsigned ones accepted, a wrong signature "
                    "still refused, for a topic guarded by Kafka ACLs)")

    confirm_answer: Literal["published", "committed"] = Field(
        default="published",
        description="when a producer's confirm answers: `published`, once the broker's answer "
                    "to its publish is recorded (the answer states it); `committed`, once the "
                    "confirm is durable, the publish following in the background (the answer "
                    "states the delivery reserved; [design section 4]"
                    "(../design.md#4-http-api-v1-contract))")

    # Limits
    max_payload_bytes: int = Field(
        default=256 * 1024, ge=1, description="largest payload (JSON-encoded); larger → 413")
    max_headers: int = Field(default=64, ge=0, description="most headers per message")
    max_header_bytes: int = Field(default=8 * 1024, ge=1,
                                  description="total header bytes per message")
    max_batch_items: int = Field(
        default=1000, ge=1, description="most items in one batch request or transaction "
                                        "(more → 413)")
    max_batch_bytes: int = Field(
        default=8 * 1024 * 1024, ge=1,
        description="largest batch or transaction request body (more → 413)")
    max_delay_seconds: float = Field(
        default=7 * 86_400.0, ge=0,
        description="furthest `deliver_after` / `delay_seconds` may delay a delivery (7 days; "
                    "more → 422)")
    # per app and per API process (message_service/limits.py)
    app_rate_limit_per_second: float = Field(
        default=0.0, ge=0,
        description="requests per second per app **per API instance** on the app-token "
                    "endpoints (token bucket; 0 = off); more → 429 with `Retry-After`")
    app_rate_limit_burst: int = Field(
        default=100, ge=1, description="bucket size: requests an idle app may make at once")
    max_pending_per_app: int = Field(
        default=100_000, ge=0,
        description="most pending-send messages per app (0 = no cap); a prepare or batch "
                    "prepare at the cap → 429 with `Retry-After`")
    # HTTP server (rms serve): connections held at once (message_service/connections.py),
    # idle keep-alive, and how long a request head and a request body may take to arrive
    http_limit_concurrency: int = Field(
        default=1000, ge=1,
        description="connections one `rms serve` process holds at once: at the cap the oldest "
                    "idle one is closed for a new one; when all are busy, 503 with "
                    "`Retry-After` but to health checks")
    http_health_reserve: int = Field(
        default=16, ge=0, description="connections above `RMS_HTTP_LIMIT_CONCURRENCY` on which "
                                      "health checks are still answered")
    # longer than the idle timeouts of the clients and proxies in front (Go 90 s, nginx and
    # AWS ALB 60 s): the client, not the server, must be the one to drop an idle connection
    http_keep_alive_seconds: float = Field(
        default=120.0, gt=0,
        description="idle keep-alive connections are closed after this; keep it above the "
                    "idle timeout of every client and proxy in front ([slow clients and the "
                    "reverse proxy](../operations/limits.md#slow-clients-and-the-reverse-proxy))")
    http_unauthenticated_keep_alive_seconds: float = Field(
        default=5.0, gt=0, description="idle keep-alive of a connection that has not shown an "
                                       "app's API key")
    http_head_timeout_seconds: float = Field(
        default=10.0, gt=0, description="a request head must arrive within this (408 and "
                                        "close beyond)")
    http_body_timeout_seconds: float = Field(
        default=30.0, gt=0, description="a request body must arrive within this of its head "
                                        "(408 and close beyond)")
    # overload protection of the producer and consumer API (message_service/admission.py)
    admission_enabled: bool = Field(
        default=True,
        description="overload protection of the producer and consumer API: authenticated new "
                    "work (prepares, sends, batches, transactions, reads) beyond the limit "
                    "waits for a place, and while that wait shows a standing queue it gets 503 "
                    "with `Retry-After` at once, an app over its fair share first; confirms, "
                    "cancels and acks pass up to the maximum ([per-app limits]"
                    "(../operations/limits.md#per-app-limits))")
    admission_limit: int = Field(
        default=64, ge=1, description="requests of new work in flight at once per API process "
                                      "(beyond, a request waits for a place)")
    admission_max_limit: int = Field(
        default=1000, ge=1, description="requests in flight at once per API process, "
                                        "confirms, cancels and acks included (503 beyond)")
    admission_queue_target_seconds: float = Field(
        default=0.005, gt=0,
        description="a wait for a place longer than this is a queue: the gate refuses once "
                    "no request of an interval waited less")
    admission_queue_interval_seconds: float = Field(
        default=0.1, gt=0,
        description="how long the wait for a place must stay above the target before the gate "
                    "refuses, and how long it must refuse nobody to be calm again")
    admission_queue_longest_wait_seconds: float = Field(
        default=0.015, gt=0,
        description="the longest a request of new work waits for a place: one that waited "
                    "this long is refused, with every request waiting (the queue stands), so "
                    "a refusal never waits long")
    admission_unauthenticated_limit: int = Field(
        default=8, ge=1,
        description="requests in flight per API process whose key the database could not look "
                    "up (held apart from the limit; 503 beyond); a request known to carry no "
                    "key or a key of no app is answered 401 at once")
    signing_secret_overlap_seconds: float = Field(
        default=86_400.0, ge=0,
        description="after `rotate-signing-secret`, how long the previous secret still signs "
                    "check-backs next to the new one")

    report_dir: str | None = Field(
        default=None, description="the `rms report --out` folder whose `summary.json` the "
                                  "dashboard shows")

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
        if self.admission_limit > self.admission_max_limit:
            raise ConfigError("RMS_ADMISSION_LIMIT must not exceed RMS_ADMISSION_MAX_LIMIT")
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
