"""The database schema as SQLAlchemy Core tables. Alembic migrations own the real DDL;
``tests/integration/store/test_migrations.py`` checks the two agree."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    Sequence,
    Table,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

metadata = MetaData()

apps = Table(
    "apps",
    metadata,
    Column("name", Text, primary_key=True),
    Column("api_key_hash", Text, nullable=False, unique=True),
    Column("signing_secret", Text, nullable=False),
    Column("previous_signing_secret", Text, nullable=True),
    Column("previous_signing_secret_expires_at", DateTime(timezone=True), nullable=True),
    Column("produce_topics", ARRAY(Text), nullable=False, server_default="{}"),
    Column("consume_topics", ARRAY(Text), nullable=False, server_default="{}"),
    Column("check_url_prefixes", ARRAY(Text), nullable=False, server_default="{}"),
    Column("default_check_url", Text, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("key_rotated_at", DateTime(timezone=True), nullable=True),
    # topics (glob patterns) whose keyed messages are published in confirm order per key
    Column("ordered_topics", ARRAY(Text), nullable=False, server_default="{}"),
    # consume_topics as one anchored POSIX regex (rms.domain.topics.consume_regex; NULL: none):
    # the confirming statement reads a message's subscribers with it; consume_regex_of, the
    # consume_topics it was computed from: the regex holds only while the two are equal (an
    # earlier release writes the topics alone; AppStore.repair_consume_regexes mends the rest)
    Column("consume_regex", Text, nullable=True),
    Column("consume_regex_of", ARRAY(Text), nullable=True),
    # when an ack of this app (as a consumer) was last recorded (NULL: none yet)
    Column("last_ack_at", DateTime(timezone=True), nullable=True),
    # the app's own delivery settings as a consumer (NULL: the message's; design section 7)
    Column("max_deliveries", Integer, CheckConstraint("max_deliveries BETWEEN 1 AND 1000",
                                                      name="apps_max_deliveries_range"),
           nullable=True),
    Column("ack_timeout_seconds", Float, CheckConstraint(
        "ack_timeout_seconds > 0 AND ack_timeout_seconds <= 604800",
        name="apps_ack_timeout_seconds_range"), nullable=True),
)

messages = Table(
    "messages",
    metadata,
    Column("message_id", Text, primary_key=True),
    Column("app", Text, ForeignKey("apps.name"), nullable=False),
    Column("topic", Text, nullable=False),
    Column("key", Text, nullable=True),
    Column("payload", JSONB, nullable=False),
    Column("headers", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("check_url", Text, nullable=True),
    Column("state", Text, nullable=False),
    Column("dead", Boolean, nullable=False, server_default=text("false")),
    Column("dead_reason", Text, nullable=True),
    Column("check_count", Integer, nullable=False, server_default=text("0")),
    Column("delivery_count", Integer, nullable=False, server_default=text("0")),
    # delivery_count at the start of the current delivery budget (an admin resend restarts it)
    Column("delivery_base", Integer, nullable=False, server_default=text("0")),
    Column("check_after_seconds", Float, nullable=False),
    Column("max_checks", Integer, nullable=False),
    Column("ack_timeout_seconds", Float, nullable=False),
    Column("max_deliveries", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("confirmed_at", DateTime(timezone=True), nullable=True),
    Column("done_at", DateTime(timezone=True), nullable=True),
    Column("deleted_at", DateTime(timezone=True), nullable=True),
    Column("next_check_at", DateTime(timezone=True), nullable=True),
    Column("next_delivery_at", DateTime(timezone=True), nullable=True),
    # a delayed message is not published before this time (NULL: at confirm)
    Column("deliver_after", DateTime(timezone=True), nullable=True),
    # a worker's claim: set when claimed, checked by the worker's guarded result update
    Column("claim_token", Text, nullable=True),
    # the W3C trace context carried to the Kafka records, check-backs and spans (NULL: none)
    Column("traceparent", Text, nullable=True),
    Column("tracestate", Text, nullable=True),
    # per-key ordering: decided at prepare; confirm_seq is the confirm order
    # (messages_confirm_seq) and the recovery workers' sequencer publishes by it
    Column("ordered", Boolean, nullable=False, server_default=text("false")),
    Column("confirm_seq", BigInteger, nullable=True),
    # the transaction the message belongs to (NULL: none) and its place there, from 0
    Column("transaction_id", Text, nullable=True),
    Column("transaction_position", Integer, nullable=True),
    # why the broker did not take the message's last publish (a publish failure reason, as in
    # the stats' publish_blocked); NULL once a publish was accepted, or when none failed
    Column("publish_failure", Text, nullable=True),
    # the delivery number the broker took (rms.domain.phase.ACCEPTED), written only by the
    # statement that records an accepted publish in the row; a refused one clears it
    Column("published_delivery", Integer, nullable=True),
    # the apps that consumed its topic when it was confirmed, sorted (NULL: the single-ack
    # rule, design section 3), and the acks recorded: {"<app>": {"at": ..., "via": ...}}
    Column("subscribers", ARRAY(Text), nullable=True),
    Column("acks", JSONB, nullable=True),
    # the subscribers that still owe an ack and whose app's own max_deliveries is spent for
    # this message, sorted (NULL: none): its later records no longer await them (design 7)
    Column("exhausted", ARRAY(Text), nullable=True),
    CheckConstraint(
        "state IN ('pending-send', 'sent', 'done', 'deleted')", name="messages_state_check"
    ),
    CheckConstraint(
        "dead_reason IS NULL OR dead_reason IN ('check-exhausted', 'delivery-exhausted')",
        name="messages_dead_reason_check",
    ),
    Index(
        "messages_due_checks",
        "next_check_at",
        postgresql_where=text("state = 'pending-send' AND NOT dead"),
    ),
    Index(
        "messages_due_deliveries",
        "next_delivery_at",
        postgresql_where=text("state = 'sent' AND NOT dead"),
    ),
    Index("messages_dead", "app", "topic", postgresql_where=text("dead")),
    Index("messages_created", "created_at", "message_id"),
    Index("messages_app_state", "app", "state"),
    Index(
        "messages_ordered_keys",
        "app", "topic", "key", "confirm_seq",
        postgresql_where=text("ordered AND state = 'sent'"),
    ),
    Index(
        "messages_ordered_due",
        "next_delivery_at",
        postgresql_where=text("ordered AND state = 'sent' AND NOT dead"),
    ),
    Index(
        "messages_transaction",
        "transaction_id",
        "transaction_position",
        postgresql_where=text("transaction_id IS NOT NULL"),
    ),
)

CONFIRM_SEQUENCE = Sequence("messages_confirm_seq", metadata=metadata)

# the sequencer's per-key lease: one worker publishes a key (app, topic, key) at a time
ordering_keys = Table(
    "ordering_keys",
    metadata,
    Column("app", Text, primary_key=True),
    Column("topic", Text, primary_key=True),
    Column("key", Text, primary_key=True),
    Column("lease_token", Text, nullable=True),
    Column("lease_until", DateTime(timezone=True), nullable=True),
)

# a transaction of several messages: confirmed or cancelled as one, checked back as one
transactions = Table(
    "transactions",
    metadata,
    Column("transaction_id", Text, primary_key=True),
    Column("app", Text, ForeignKey("apps.name"), nullable=False),
    Column("check_url", Text, nullable=False),
    Column("message_ids", ARRAY(Text), nullable=False),  # in publish order
    Column("state", Text, nullable=False),
    Column("dead", Boolean, nullable=False, server_default=text("false")),
    Column("dead_reason", Text, nullable=True),
    Column("check_count", Integer, nullable=False, server_default=text("0")),
    Column("check_after_seconds", Float, nullable=False),
    Column("max_checks", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("confirmed_at", DateTime(timezone=True), nullable=True),
    Column("cancelled_at", DateTime(timezone=True), nullable=True),
    Column("next_check_at", DateTime(timezone=True), nullable=True),
    Column("claim_token", Text, nullable=True),
    CheckConstraint(
        "state IN ('pending', 'confirmed', 'cancelled')", name="transactions_state_check"
    ),
    CheckConstraint(
        "dead_reason IS NULL OR dead_reason = 'check-exhausted'",
        name="transactions_dead_reason_check",
    ),
    Index(
        "transactions_due_checks",
        "next_check_at",
        postgresql_where=text("state = 'pending' AND NOT dead"),
    ),
    Index("transactions_app_state", "app", "state"),
    Index("transactions_created", "created_at", "transaction_id"),
)

message_events = Table(
    "message_events",
    metadata,
    Column("id", BigInteger, Identity(always=False), primary_key=True),
    Column("message_id", Text, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("event", Text, nullable=False),
    Column("actor", Text, nullable=False),
    Column("detail", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Index("message_events_message", "message_id", "id"),
    Index("message_events_at", "at"),
    # the deliveries in flight: the publish outcomes complete their event (migration 0016)
    Index("message_events_publishing", "message_id",
          postgresql_where=text("event = 'publishing'")),
)

# what ``rms retention run`` (a CLI job, not a server) did: one row, updated by every run and
# read by the API's /metrics, so Prometheus sees retention through the scrape it already has
retention_status = Table(
    "retention_status",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False, server_default=text("1")),
    Column("last_run_at", DateTime(timezone=True), nullable=True),
    Column("last_success_at", DateTime(timezone=True), nullable=True),
    Column("last_failure_at", DateTime(timezone=True), nullable=True),
    Column("runs_total", BigInteger, nullable=False, server_default=text("0")),
    Column("failures_total", BigInteger, nullable=False, server_default=text("0")),
    Column("messages_removed_total", BigInteger, nullable=False, server_default=text("0")),
    Column("messages_archived_total", BigInteger, nullable=False, server_default=text("0")),
    Column("events_removed_total", BigInteger, nullable=False, server_default=text("0")),
    CheckConstraint("id = 1", name="retention_status_one_row"),
)
