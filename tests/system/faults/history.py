"""What a fault scenario records, and what the database says at the end: plain data, shared by
the recorder (:mod:`tests.system.faults.load`) and the checker (:mod:`tests.system.faults.checker`)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# What the producer's own database ended with, per message id (the ground truth of phantoms):
COMMITTED, ROLLED_BACK, OPEN = "committed", "rolled_back", "open"
FINAL_STATES = frozenset({"done", "deleted"})


@dataclass(frozen=True, slots=True)
class Op:
    """One request and its answer. ``status`` None: no answer (connection lost, process
    killed, timeout). ``state``/``owner``: the message's state and app in a 2xx answer."""

    kind: str  # prepare, confirm, cancel, ack, ack-topic, probe; txn-prepare, txn-confirm, ...
    app: str
    message_id: str  # a transaction's id for the txn- kinds
    status: int | None
    state: str | None = None
    owner: str | None = None
    at: float = field(default_factory=time.monotonic)  # the request's start
    answered: float | None = None  # when the answer came (monotonic; None: no answer)

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


@dataclass(frozen=True, slots=True)
class Consumed:
    """One Kafka record a consumer app read (its ``rms-*`` headers). ``awaiting``: the
    subscribers its ``rms-awaiting`` header names (None: no header, the single-ack rule)."""

    message_id: str
    app: str
    topic: str
    delivery: int
    partition: int = 0
    offset: int = 0
    timestamp: float = 0.0  # the record's timestamp (epoch seconds, the publisher's clock)
    at: float = field(default_factory=time.monotonic)  # when it was read
    consumer: str = ""  # the consumer app that read it
    awaiting: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class CheckAnswer:
    """What the producer's check-back endpoint answered (RMS may not have received it)."""

    message_id: str  # or a transaction's id
    app: str
    status: str
    at: float = field(default_factory=time.monotonic)


@dataclass(frozen=True, slots=True)
class Claim:
    """A worker's claim on a message as the primary had it committed: its claim token and the
    counters the claim advanced."""

    message_id: str
    token: str | None
    delivery_count: int
    check_count: int


@dataclass
class Failover:
    """One loss of the PostgreSQL primary (killed, or a switchover): the claims committed just
    before and the events of those messages then, the same rows read on the new primary right
    after its promotion, and when."""

    kind: str  # pg-primary-kill, pg-node-kill, pg-switchover
    old: str
    killed_at: float  # monotonic
    new: str = ""
    promoted_at: float | None = None
    rejoined_at: float | None = None  # the old primary streaming as a standby again
    before: list[Claim] = field(default_factory=list)
    after: dict[str, Claim] = field(default_factory=dict)
    events: list[StoredEvent] = field(default_factory=list)  # the claimed messages' events


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken invariant: its kind (``checker.KINDS``), the message and what was seen."""

    kind: str
    message_id: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.message_id}: {self.detail}"


@dataclass
class History:
    """Everything the clients saw during a scenario."""

    ops: list[Op] = field(default_factory=list)
    consumed: list[Consumed] = field(default_factory=list)
    answers: list[CheckAnswer] = field(default_factory=list)
    truth: dict[str, str] = field(default_factory=dict)  # message or transaction id -> ...
    consumers: set[str] = field(default_factory=set)  # apps allowed to ack
    # topic -> the consumer apps whose consume_topics match it (a confirm's subscribers)
    subscriptions: dict[str, frozenset[str]] = field(default_factory=dict)
    silent: set[str] = field(default_factory=set)  # consumer apps that read and never ack
    transactions: dict[str, tuple[str, ...]] = field(default_factory=dict)  # id -> members
    features: Counter[str] = field(default_factory=Counter)  # ordered, delayed, retention-run..
    log_lost: bool = False  # the broker lost its log: records (and so their order) are gone
    failovers: list[Failover] = field(default_factory=list)

    def set_truth(self, unit: str, value: str) -> None:
        """The producer's local transaction of a message, or of a transaction and its
        members, ended (or is open)."""
        for message_id in (unit, *self.transactions.get(unit, ())):
            self.truth[message_id] = value

    def transaction_of(self, message_id: str) -> str | None:
        return self._members().get(message_id)

    def _members(self) -> dict[str, str]:
        return {m: t for t, members in self.transactions.items() for m in members}

    def counts(self) -> Counter[str]:
        """Operations by kind (2xx or not), records consumed, check-backs answered and the
        features the load used."""
        found = Counter(op.kind for op in self.ops)
        found["kafka-record"] = len(self.consumed)
        found["check-back"] = len(self.answers)
        return found + self.features


@dataclass(frozen=True, slots=True)
class FinalMessage:
    """A message row at the end. ``overdue``: seconds past its next due time (negative: not
    due yet; None: nothing scheduled)."""

    message_id: str
    app: str
    topic: str
    state: str
    dead: bool
    dead_reason: str | None
    max_deliveries: int
    delivery_count: int
    overdue: float | None = None
    key: str | None = None
    ordered: bool = False
    confirm_seq: int | None = None
    deliver_after: float | None = None  # epoch seconds (the database clock)
    transaction_id: str | None = None
    archived: bool = False  # read from the retention archive, not the live table
    subscribers: tuple[str, ...] | None = None  # None: the single-ack rule
    acks: dict[str, float] = field(default_factory=dict)  # consumer -> when (epoch seconds)

    @property
    def settled(self) -> bool:
        return self.state in FINAL_STATES or self.dead


@dataclass(frozen=True, slots=True)
class StoredEvent:
    message_id: str
    event: str
    actor: str
    detail: dict[str, Any] = field(default_factory=dict)
    id: int = 0
    at: float = 0.0  # epoch seconds (the database clock)


@dataclass
class Final:
    """The database after the scenario: messages of the scenario's apps and their events
    (in id order), and what the retention runs moved to the archive (empty without one)."""

    messages: dict[str, FinalMessage] = field(default_factory=dict)
    events: list[StoredEvent] = field(default_factory=list)
    archived: list[FinalMessage] = field(default_factory=list)  # every archived row, repeats kept
    archived_events: list[StoredEvent] = field(default_factory=list)

    def merged(self) -> Final:
        """Live and archived together: each message once (live wins), events in id order."""
        if not self.archived and not self.archived_events:
            return self
        messages = {m.message_id: m for m in self.archived} | self.messages
        events = {e.id: e for e in self.archived_events} | {e.id: e for e in self.events}
        return Final(messages, sorted(events.values(), key=lambda e: e.id))
