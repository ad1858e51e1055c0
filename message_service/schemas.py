"""Request and response bodies of HTTP API v1 (design section 4, a contract)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import orjson
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

from rms.domain.topics import TOPIC_PATTERN, is_valid_topic
from rms_client.ids import APP_NAME_PATTERN, MESSAGE_ID_PATTERN, RESERVED_MESSAGE_IDS
from rms_client.timestamps import EXAMPLE as TIMESTAMP_EXAMPLE
from rms_client.timestamps import TimestampError, parse_rfc3339


def _not_reserved(value: str) -> str:
    if value in RESERVED_MESSAGE_IDS:
        reason = ("a path segment clients remove" if value.strip(".") == "" else
                  "it names a route under /v1/messages")
        raise ValueError(f"{value!r} is reserved ({reason})")
    return value


def _kafka_topic(value: str) -> str:
    if not is_valid_topic(value):
        raise ValueError(f"{value!r} is not a valid Kafka topic name")
    return value


def _json_storable(value: Any) -> Any:
    """The payload is stored and published as JSON: refuse what cannot be encoded (an integer
    beyond 64 bits) here, as a 422, rather than deep in the service."""
    try:
        orjson.dumps(value)
    except TypeError as exc:
        raise ValueError(f"payload cannot be encoded as JSON: {exc}") from None
    return value


def _rfc3339(value: Any) -> Any:
    """An RFC 3339 timestamp exactly (:mod:`rms_client.timestamps`)."""
    if not isinstance(value, str):
        raise ValueError(f"must be an RFC 3339 timestamp string, e.g. {TIMESTAMP_EXAMPLE}")
    try:
        return parse_rfc3339(value)
    except TimestampError as exc:
        raise ValueError(str(exc)) from None


MessageId = Annotated[str, StringConstraints(pattern=MESSAGE_ID_PATTERN),
                      AfterValidator(_not_reserved)]
Topic = Annotated[str, StringConstraints(pattern=TOPIC_PATTERN), AfterValidator(_kafka_topic)]
TopicGlob = Annotated[str, StringConstraints(min_length=1, max_length=249)]
# globs (or check-URL prefixes) one list of an app holds at most: every permission check and the
# confirming statement's regex read them all, so their number is bounded like their length
MAX_APP_PATTERNS = 100
TopicGlobs = Annotated[list[TopicGlob], Field(max_length=MAX_APP_PATTERNS)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class MessageContent(Strict):
    """A message's own fields: a prepare body without its check-back fields (a message of a
    transaction is one: the transaction is checked back as one)."""

    message_id: MessageId | None = Field(
        default=None, description="1-128 chars of A-Za-z0-9._:- ; generated when absent")
    topic: Topic
    key: Annotated[str, StringConstraints(max_length=1024)] | None = Field(
        default=None, description="the Kafka record key; at most 1,024 bytes in UTF-8")
    payload: Annotated[Any, AfterValidator(_json_storable)] = Field(
        description="any JSON value (the Kafka record value)")
    headers: dict[str, str] = Field(default_factory=dict)
    ack_timeout_seconds: float | None = Field(default=None, gt=0, le=7 * 86_400)
    max_deliveries: int | None = Field(default=None, ge=1, le=1_000)
    deliver_after: Annotated[datetime, BeforeValidator(_rfc3339)] | None = Field(
        default=None, description="RFC 3339 time before which the confirmed message is not "
        "published (at most RMS_MAX_DELAY_SECONDS ahead); not with delay_seconds")
    delay_seconds: float | None = Field(
        default=None, ge=0, description="publish this many seconds after the prepare at the "
        "earliest (at most RMS_MAX_DELAY_SECONDS); not with deliver_after")


class PrepareRequest(MessageContent):
    check_url: Annotated[str, StringConstraints(max_length=2048)] | None = None
    check_after_seconds: float | None = Field(default=None, ge=0, le=86_400)
    max_checks: int | None = Field(default=None, ge=1, le=1_000)


class BatchPrepareRequest(Strict):
    messages: list[PrepareRequest] = Field(min_length=1)


class BatchIdsRequest(Strict):
    message_ids: list[MessageId] = Field(min_length=1)


class AckOut(BaseModel):
    at: datetime
    via: str = Field(description="http | ack-topic")


class SubscriberOut(BaseModel):
    app: str
    acked_at: datetime | None = Field(description="null while the app owes its ack")
    via: str | None = Field(description="http | ack-topic; null while the app owes its ack")
    exhausted: bool = Field(default=False, description=(
        "the app's own max_deliveries is spent for this message while it owes its ack: the "
        "message's later deliveries no longer await it (it is dead for this app, and an ack "
        "it sends is still recorded); an admin resend restarts its budget"))


class MessageOut(BaseModel):
    message_id: str
    app: str
    topic: str
    key: str | None
    payload: Any
    headers: dict[str, str]
    state: str = Field(description="pending-send | sent | done | deleted")
    dead: bool
    dead_reason: str | None = Field(description="check-exhausted | delivery-exhausted | null")
    check_count: int
    delivery_count: int
    check_url: str | None
    max_checks: int
    max_deliveries: int
    created_at: datetime
    confirmed_at: datetime | None
    done_at: datetime | None
    deleted_at: datetime | None
    next_check_at: datetime | None
    next_delivery_at: datetime | None
    deliver_after: datetime | None = Field(
        default=None, description="a delayed message is not published before this time")
    traceparent: str | None = Field(
        default=None, description="W3C trace context the message carries to its Kafka records "
        "and check-backs (null: none)")
    tracestate: str | None = Field(default=None, description="W3C tracestate kept with it")
    ordered: bool = Field(default=False, description="published in confirm order per key "
                          "(its topic matched the app's ordered_topics when it was prepared)")
    publish_failure: str | None = Field(
        default=None, description="why the broker did not take the message's last publish "
        "(topic-missing, not-authorized, timeout, ...; as in publish_blocked of the stats): "
        "its delivery number was given back and it is published again at next_delivery_at. "
        "null once a publish was accepted, or when none failed")
    subscribers: list[SubscriberOut] | None = Field(
        default=None, description="the apps that consumed the topic when the message was "
        "confirmed, each with its ack or null while it owes one; the message is done once "
        "every one acked. null: the single-ack rule (the first permitted ack finishes it)")
    acks: dict[str, AckOut] | None = Field(
        default=None, description="every ack recorded, by consumer app (null before the first)")


class BatchOut(BaseModel):
    messages: list[MessageOut]


class TransactionMessage(MessageContent):
    """A message of a transaction: its check-back fields are the transaction's."""


class TransactionRequest(Strict):
    transaction_id: MessageId | None = Field(
        default=None, description="same rules as a message_id; generated when absent")
    check_url: Annotated[str, StringConstraints(max_length=2048)] | None = Field(
        default=None, description="asked once for the whole transaction; default: the "
        "app's default_check_url")
    check_after_seconds: float | None = Field(default=None, ge=0, le=86_400)
    max_checks: int | None = Field(default=None, ge=1, le=1_000)
    messages: list[TransactionMessage] = Field(
        min_length=1, description="published in this order once confirmed")


class TransactionFields(BaseModel):
    """The fields every view of a transaction shares, in the contract's order."""

    transaction_id: str
    app: str
    state: str = Field(description="pending | confirmed | cancelled")
    dead: bool
    dead_reason: str | None = Field(description="check-exhausted | null")
    check_count: int
    check_url: str
    max_checks: int
    created_at: datetime
    confirmed_at: datetime | None
    cancelled_at: datetime | None
    next_check_at: datetime | None


class TransactionOut(TransactionFields):
    messages: list[MessageOut] = Field(description="in the transaction's order")


class TransactionSummary(TransactionFields):
    """A transaction of the admin listing: the transaction object without its messages."""

    message_ids: list[str] = Field(description="its messages, in the transaction's order")
    age_seconds: float = Field(description="since it was prepared (database clock)")


class TransactionPage(BaseModel):
    items: list[TransactionSummary]
    next_cursor: str | None


class EventOut(BaseModel):
    at: datetime
    event: str
    actor: str
    detail: dict[str, Any]


class EventsOut(BaseModel):
    events: list[EventOut]
    next_cursor: str | None = Field(
        default=None, description="the cursor of the next page of events (null: none left)")


class MessagePage(BaseModel):
    items: list[MessageOut]
    next_cursor: str | None


# a consumer app's own delivery settings (design section 7); null: the message's
AppMaxDeliveries = Annotated[int | None, Field(
    ge=1, le=1_000, description="as a consumer: the deliveries of each message it is owed "
    "(1 to 1000; null: the message's)")]
AppAckTimeout = Annotated[float | None, Field(
    gt=0, le=7 * 86_400, description="as a consumer: seconds each delivery waits for its ack "
    "before the next, doubling (up to 604800; null: the message's)")]


class AppCreate(Strict):
    name: Annotated[str, StringConstraints(pattern=APP_NAME_PATTERN)]
    produce_topics: TopicGlobs = Field(default_factory=list)
    consume_topics: TopicGlobs = Field(default_factory=list)
    check_url_prefixes: list[Annotated[str, StringConstraints(max_length=2048)]] = Field(
        default_factory=list, max_length=MAX_APP_PATTERNS)
    default_check_url: Annotated[str, StringConstraints(max_length=2048)] | None = None
    ordered_topics: TopicGlobs = Field(
        default_factory=list, description="topics (glob patterns) whose keyed messages are "
        "published in confirm order per key")
    max_deliveries: AppMaxDeliveries = None
    ack_timeout_seconds: AppAckTimeout = None


class DeliveryRequest(Strict):
    max_deliveries: AppMaxDeliveries = None
    ack_timeout_seconds: AppAckTimeout = None


class OrderedTopicsRequest(Strict):
    ordered_topics: TopicGlobs = Field(
        description="replaces the app's ordered topics; applies to messages prepared from now on")


class ConsumeTopicsRequest(Strict):
    consume_topics: TopicGlobs = Field(
        description="replaces the app's consume topics: messages confirmed from now on take "
        "them; the app is released from the sent messages it owes whose topic they no longer "
        "match")


class AppDeletedOut(BaseModel):
    name: str
    released: int = Field(description="the sent messages the app was released from")


class AppOut(BaseModel):
    name: str
    produce_topics: list[str]
    consume_topics: list[str]
    check_url_prefixes: list[str]
    default_check_url: str | None
    created_at: datetime
    key_rotated_at: datetime | None
    previous_signing_secret_expires_at: datetime | None = Field(
        default=None, description="while a signing-secret rotation overlaps: until when the "
        "previous secret still signs check-backs (null when only one secret signs)")
    ordered_topics: list[str] = Field(default_factory=list, description="topics (glob "
                                      "patterns) whose keyed messages are published in confirm "
                                      "order per key")
    max_deliveries: int | None = Field(
        default=None, description="as a consumer: the deliveries of each message it is owed "
        "(null: the message's)")
    ack_timeout_seconds: float | None = Field(
        default=None, description="as a consumer: seconds a delivery waits for its ack "
        "(null: the message's)")
    last_ack_at: datetime | None = Field(
        default=None, description="when an ack of this app as a consumer was last recorded, "
        "to the second (null: none yet)")


class AppCredentialsOut(AppOut):
    api_key: str = Field(description="shown once")
    signing_secret: str = Field(description="shown once; signs check-back calls")


class AppsOut(BaseModel):
    apps: list[AppOut]


class RotateRequest(Strict):
    rotate_signing_secret: bool = False


MAX_OVERLAP_SECONDS = 30 * 86_400


class RotateSigningSecretRequest(Strict):
    overlap_seconds: float | None = Field(
        default=None, ge=0, le=MAX_OVERLAP_SECONDS,
        description="how long the previous secret keeps signing check-backs next to the new "
                    "one (default RMS_SIGNING_SECRET_OVERLAP_SECONDS; 0 ends it at once)")


class SigningSecretOut(AppOut):
    signing_secret: str = Field(description="the new secret, shown once")


class GroupStats(BaseModel):
    app: str
    topic: str
    counts: dict[str, int] = Field(description="by state, plus 'dead', plus 'scheduled' "
                                   "(sent messages waiting for their deliver_after)")
    oldest_pending_send_age_seconds: float | None
    oldest_unacked_age_seconds: float | None


class BlockedPublishStats(BaseModel):
    app: str
    topic: str
    reason: str = Field(description="why the last publish failed: topic-missing, timeout, "
                        "broker-unavailable, not-enough-replicas, too-large, not-authorized, producer-reset, "
                        "refused; held-for-order: a message of a transaction waiting behind an "
                        "earlier one; transaction-aborted: a message of a transaction whose Kafka "
                        "transaction was aborted because another member's publish failed)")
    messages: int
    oldest_confirmed_age_seconds: float | None


class BlockedKeyStats(BaseModel):
    topic: str
    key: str
    app: str = Field(description="the app of the message holding the key back")
    message_id: str = Field(description="the message holding the key back")
    reason: str = Field(description="dead (until an operator resolves it), publish-failed "
                        "(waiting for its retry), awaiting-redelivery (ack deadline passed), "
                        "scheduled (delayed, its deliver_after not come) or held-for-order "
                        "(an earlier message of its transaction not yet published)")
    waiting: int = Field(description="later messages of the key not yet published")


class ConsumerStats(BaseModel):
    consumer: str = Field(description="a consumer app")
    unacked: int = Field(description="sent messages (dead included) it is a subscriber of and "
                         "has not acked")
    oldest_unacked_age_seconds: float | None = Field(
        description="age since confirm of the oldest of them")
    last_ack_at: datetime | None = Field(
        default=None, description="when an ack of this app was last recorded (null: none yet)")
    seconds_since_ack: float | None = Field(
        default=None, description="seconds since then, or since the app was registered when "
        "none was recorded (database clock)")


class StatsOut(BaseModel):
    totals: dict[str, int]
    oldest_pending_send_age_seconds: float | None
    oldest_unacked_age_seconds: float | None
    groups: list[GroupStats]
    publish_blocked: list[BlockedPublishStats] = Field(
        default_factory=list, description="sent messages whose last publish failed, waiting "
        "for their retry: by app, topic and reason")
    blocked_keys: list[BlockedKeyStats] = Field(
        default_factory=list, description="ordered keys (app, topic, key) held back by one "
        "of their messages (at most 100, by app, topic and key)")
    consumers: list[ConsumerStats] = Field(
        default_factory=list, description="per consumer app that owes acks: how many sent "
        "messages and the age of the oldest")


class Problem(BaseModel):
    type: str
    title: str
    status: int
    detail: str
    errors: list[dict[str, Any]] | None = None
    current_state: str | None = None
    transaction_id: str | None = Field(default=None, description="409 part-of-transaction: "
                                       "the transaction the message is confirmed or "
                                       "cancelled with")
    retry_after: int | None = Field(default=None, description="429/503: seconds to wait "
                                    "(also the Retry-After header)")
    pending_count: int | None = Field(default=None, description="429 at the pending cap: "
                                      "the app's pending-send messages")
    pending_cap: int | None = Field(default=None, description="429 at the pending cap: "
                                    "RMS_MAX_PENDING_PER_APP")
