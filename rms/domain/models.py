"""Domain records passed between the store, the services and the HTTP layer."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from rms.domain.states import DeadReason, State
from rms_client.trace import TraceContext


class Actor(StrEnum):
    """Who caused a transition (recorded as ``detail.by`` on confirmed/cancelled events)."""

    PRODUCER = "producer"
    CHECK_BACK = "check-back"
    ADMIN = "admin"


@dataclass(frozen=True, slots=True)
class App:
    name: str
    produce_topics: tuple[str, ...]
    consume_topics: tuple[str, ...]
    check_url_prefixes: tuple[str, ...]
    default_check_url: str | None
    signing_secret: str = field(repr=False)  # never in a log line that prints an App
    previous_signing_secret: str | None = field(repr=False)
    created_at: datetime
    key_rotated_at: datetime | None = None
    # while set and in the future, check-backs are signed with both secrets
    previous_signing_secret_expires_at: datetime | None = None
    # keyed messages on these topics (glob patterns) are published in confirm order per key
    ordered_topics: tuple[str, ...] = ()
    # as a consumer: the deliveries it is owed and its ack deadline (None: the message's)
    max_deliveries: int | None = None
    ack_timeout_seconds: float | None = None
    # when an ack of it (as a consumer) was last recorded, to the second (None: none yet)
    last_ack_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A validated prepare request, with the policy already resolved."""

    message_id: str
    topic: str
    key: str | None
    payload: Any
    headers: dict[str, str]
    check_url: str | None
    check_after_seconds: float
    max_checks: int
    ack_timeout_seconds: float
    max_deliveries: int
    # delayed delivery: an absolute time, or seconds after the prepare (database clock)
    deliver_after: datetime | None = None
    delay_seconds: float | None = None
    # the W3C trace context the message is stored with (the request's, or RMS's prepare span)
    trace: TraceContext | None = None
    ordered: bool = False  # published in confirm order per key (the app's ordered_topics)


@dataclass(frozen=True, slots=True)
class ConsumerAck:
    """One consumer's ack of a message: when (database clock) and by which path (``http`` |
    ``ack-topic``)."""

    at: datetime
    via: str


@dataclass(frozen=True, slots=True)
class Message:
    message_id: str
    app: str
    topic: str
    key: str | None
    payload: Any
    headers: dict[str, str]
    check_url: str | None
    state: State
    dead: bool
    dead_reason: DeadReason | None
    check_count: int
    delivery_count: int
    delivery_base: int
    check_after_seconds: float
    max_checks: int
    ack_timeout_seconds: float
    max_deliveries: int
    created_at: datetime
    confirmed_at: datetime | None
    done_at: datetime | None
    deleted_at: datetime | None
    next_check_at: datetime | None
    next_delivery_at: datetime | None
    claim_token: str | None = field(default=None, repr=False)
    deliver_after: datetime | None = None
    trace: TraceContext | None = None  # W3C trace context carried to records and check-backs
    ordered: bool = False
    confirm_seq: int | None = None  # the confirm order of an ordered message
    transaction_id: str | None = None  # the transaction it is confirmed or cancelled with
    # why the broker did not take its last publish (None: accepted, or none failed)
    publish_failure: str | None = None
    # the delivery number the broker took, as recorded in the row by a worker's, the
    # sequencer's, a resend's or a transaction's accepted publish (None: none recorded; the
    # first publish of a producer's confirm or one-shot send is recorded in the history only)
    published_delivery: int | None = None
    # the apps that consumed its topic when it was confirmed, sorted (None: the single-ack
    # rule, design section 3), and the acks recorded by consumer
    subscribers: tuple[str, ...] | None = None
    acks: dict[str, ConsumerAck] = field(default_factory=dict)
    # the subscribers owing an ack whose app's own delivery budget is spent (design section 7)
    exhausted: tuple[str, ...] = ()

    @property
    def deliveries_in_budget(self) -> int:
        """Deliveries made since the budget last (re)started (an admin resend restarts it)."""
        return self.delivery_count - self.delivery_base

    def same_content(self, draft: NewMessage) -> bool:
        """Whether a repeated prepare with this id carries the same message (safe retry)."""
        return (
            self.topic == draft.topic
            and self.key == draft.key
            and self.payload == draft.payload
            and self.headers == draft.headers
            and self.check_url == draft.check_url
            and self._same_delay(draft)
        )

    def _same_delay(self, draft: NewMessage) -> bool:
        """A retry repeats the delay: the same absolute time, or again a relative delay (its
        time was fixed by the first prepare)."""
        if draft.deliver_after is not None:
            return self.deliver_after == draft.deliver_after
        return (self.deliver_after is not None) == (draft.delay_seconds is not None)


@dataclass(frozen=True, slots=True)
class MessageEvent:
    at: datetime
    event: str
    actor: str
    detail: dict[str, Any]


@dataclass(frozen=True, slots=True)
class PublishOutcome:
    """What happened when a record was handed to the broker."""

    message_id: str
    delivery: int
    ok: bool
    error: str | None = None
    reason: str | None = None  # a failure's cause: topic-missing, timeout, broker-unavailable, ...
