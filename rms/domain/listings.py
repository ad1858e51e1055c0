"""What the operators' listings filter by and return: plain values the routes build and the
store turns into SQL (``rms.store.admin``, ``rms.store.transactions``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from rms.domain.states import State
from rms.domain.transactions import Transaction, TransactionState


@dataclass(frozen=True, slots=True)
class MessageFilter:
    """The message listing's filters (None: any)."""

    state: State | None = None
    dead: bool | None = None
    topic: str | None = None
    app: str | None = None
    consumer: str | None = None  # only the messages this app still owes (design section 3)


@dataclass(frozen=True, slots=True)
class ConsumerBacklog:
    """What a consumer app owes: the ``sent`` messages (dead included) whose subscribers it is
    in without having acked, the age of the oldest since its confirm, when an ack of it was
    last recorded (None: none yet) and the seconds since then, or since the app was registered
    when it has none (database clock): a consumer app that owes messages with nothing running
    for it shows a growing ``seconds_since_ack``."""

    consumer: str
    unacked: int
    oldest_unacked_age_seconds: float | None
    last_ack_at: datetime | None = None
    seconds_since_ack: float | None = None


@dataclass(frozen=True, slots=True)
class TransactionFilter:
    """The transaction listing's filters (None: any)."""

    state: TransactionState | None = None
    dead: bool | None = None
    app: str | None = None


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    """A transaction of the admin listing and its age (database clock)."""

    transaction: Transaction
    age_seconds: float
