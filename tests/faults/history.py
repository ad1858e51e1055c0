"""What a fault scenario records, and what the database says at the end: plain data, shared by
the recorder (:mod:`tests.faults.load`) and the checker (:mod:`tests.faults.checker`)."""

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

    kind: str  # prepare, confirm, cancel, ack, ack-topic, probe
    app: str
    message_id: str
    status: int | None
    state: str | None = None
    owner: str | None = None
    at: float = field(default_factory=time.monotonic)

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


@dataclass(frozen=True, slots=True)
class Consumed:
    """One Kafka record a consumer read (its ``rms-*`` headers)."""

    message_id: str
    app: str
    topic: str
    delivery: int


@dataclass(frozen=True, slots=True)
class CheckAnswer:
    """What the producer's check-back endpoint answered (RMS may not have received it)."""

    message_id: str
    app: str
    status: str


@dataclass
class History:
    """Everything the clients saw during a scenario."""

    ops: list[Op] = field(default_factory=list)
    consumed: list[Consumed] = field(default_factory=list)
    answers: list[CheckAnswer] = field(default_factory=list)
    truth: dict[str, str] = field(default_factory=dict)  # message_id -> COMMITTED/...
    consumers: set[str] = field(default_factory=set)  # apps allowed to ack

    def counts(self) -> Counter[str]:
        """Operations by kind (2xx or not), records consumed and check-backs answered."""
        found = Counter(op.kind for op in self.ops)
        found["kafka-record"] = len(self.consumed)
        found["check-back"] = len(self.answers)
        return found


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

    @property
    def settled(self) -> bool:
        return self.state in FINAL_STATES or self.dead


@dataclass(frozen=True, slots=True)
class StoredEvent:
    message_id: str
    event: str
    actor: str
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class Final:
    """The database after the scenario: messages of the scenario's apps and their events
    (in id order)."""

    messages: dict[str, FinalMessage] = field(default_factory=dict)
    events: list[StoredEvent] = field(default_factory=list)
