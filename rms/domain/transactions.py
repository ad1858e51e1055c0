"""Transactions of several messages (design section 4, "Transactions"): the states of a
transaction and its records. The changes a transaction row undergoes are the rows of
:mod:`rms.domain.transaction_transitions`.

A transaction's messages are stored ``pending-send`` like prepared ones, but they are never
checked back on their own (their ``next_check_at`` stays NULL): the transaction is. Its confirm
and cancel apply the messages' own ``confirm`` / ``cancel`` transitions
(:mod:`rms.domain.transitions`) to every message of the transaction in the same database
transaction as the change of the transaction row, so a transaction never splits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType

from rms.domain.models import Message, NewMessage
from rms.domain.states import DeadReason
from rms_client.trace import TraceContext


class TransactionState(StrEnum):
    PENDING = "pending"
    CONFIRMED = "confirmed"
    CANCELLED = "cancelled"


# the column that records when a transaction reached each of its final states
TRANSACTION_FINISHED_AT: Mapping[TransactionState, str] = MappingProxyType({
    TransactionState.CONFIRMED: "confirmed_at", TransactionState.CANCELLED: "cancelled_at"})


@dataclass(frozen=True, slots=True)
class NewTransaction:
    """A validated transaction request: its messages in publish order, the policy resolved."""

    transaction_id: str
    check_url: str
    check_after_seconds: float
    max_checks: int
    messages: tuple[NewMessage, ...]


@dataclass(frozen=True, slots=True)
class Transaction:
    transaction_id: str
    app: str
    check_url: str
    message_ids: tuple[str, ...]
    state: TransactionState
    dead: bool
    dead_reason: DeadReason | None
    check_count: int
    check_after_seconds: float
    max_checks: int
    created_at: datetime
    confirmed_at: datetime | None
    cancelled_at: datetime | None
    next_check_at: datetime | None
    claim_token: str | None = None

    def same_content(self, draft: NewTransaction, stored: list[Message],
                     given_ids: list[str | None]) -> bool:
        """Whether a repeated request under this id carries the same transaction (a safe
        retry): same check URL and the same messages in the same order; an item sent without
        a message_id matches the stored message at its place."""
        if self.check_url != draft.check_url or len(stored) != len(draft.messages):
            return False
        return all(
            message.same_content(new) and given in (None, message.message_id)
            for message, new, given in zip(stored, draft.messages, given_ids, strict=True)
        )


@dataclass(frozen=True, slots=True)
class TransactionView:
    """A transaction with its messages, in order."""

    transaction: Transaction
    messages: tuple[Message, ...]

    @property
    def trace(self) -> TraceContext | None:
        """The transaction's W3C trace context: its messages are all stored with the one of
        the request that prepared them, so the first message's."""
        return self.messages[0].trace if self.messages else None
