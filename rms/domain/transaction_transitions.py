"""The transaction's transition table (design section 4, "Transactions"): every change a
transaction row undergoes, held as data in the vocabulary of the message table
(:mod:`rms.domain.transitions`), and rendered by the same renderer.

A row names the state it starts from, the state it leaves the transaction in, its column
effects, and the message transition every message of the transaction takes with it (in the
same database transaction, so a transaction never splits). A transaction's messages are never
checked back on their own: they are stored by :data:`PREPARE_MEMBER` (no ``next_check_at``),
and the transaction is checked instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from rms.domain import transitions as message
from rms.domain.states import DeadReason, Event, State
from rms.domain.transactions import TransactionState
from rms.domain.transitions import Effect, Given, Later, Now, Plus, Transition

PENDING = TransactionState.PENDING


@dataclass(frozen=True, slots=True)
class TransactionTransition:
    """One guarded change of a transaction row. ``source``: the state it applies to;
    ``dead``: the ``dead`` flag it requires (None: either); ``message``: the transition each
    of its messages takes (None: they stay as they are). A confirm's messages take
    :data:`rms.domain.transitions.CONFIRM_CLAIMED`: they stay claimed by the confirm until the
    broker's answers are recorded, so no other first publish of the transaction overtakes
    theirs."""

    action: str
    source: TransactionState
    target: TransactionState
    effects: Mapping[str, Effect]
    message: Transition | None = None
    dead: bool | None = None

    @property
    def member(self) -> Transition:
        """The transition each message of the transaction takes (only for a row that moves
        them)."""
        if self.message is None:
            raise ValueError(f"{self.action} moves no message of the transaction")
        return self.message


def _frozen(effects: dict[str, Effect]) -> Mapping[str, Effect]:
    return MappingProxyType(effects)


_RELEASED: dict[str, Effect] = {"next_check_at": None, "claim_token": None}
_ALIVE: dict[str, Effect] = {**_RELEASED, "dead": False, "dead_reason": None}


# a new transaction (a new row, stored in its source state), first due for its check-back after
# its own delay (given when stored)
PREPARE = TransactionTransition(
    "prepare", PENDING, PENDING,
    _frozen({"state": PENDING.value, "next_check_at": Later(Given("check_after"))}))
CLAIM_CHECK = TransactionTransition(
    "claim-check", PENDING, PENDING,
    _frozen({"next_check_at": Later(Given("lease")), "claim_token": Given("token"),
             "check_count": Plus("check_count", 1)}),
    dead=False)
RETRY_CHECK = TransactionTransition(
    "retry-check", PENDING, PENDING,
    _frozen({"claim_token": None, "next_check_at": Later(Given("delay"))}))
# the transaction stays pending, flagged dead for an operator with all its messages
CHECK_EXHAUSTED = TransactionTransition(
    "check-exhausted", PENDING, PENDING,
    _frozen({**_RELEASED, "dead": True, "dead_reason": DeadReason.CHECK_EXHAUSTED.value}),
    message=message.CHECK_EXHAUSTED)
CONFIRM = TransactionTransition(
    "confirm", PENDING, TransactionState.CONFIRMED,
    _frozen({**_ALIVE, "state": TransactionState.CONFIRMED.value, "confirmed_at": Now()}),
    message=message.CONFIRM_CLAIMED)
CANCEL = TransactionTransition(
    "cancel", PENDING, TransactionState.CANCELLED,
    _frozen({**_ALIVE, "state": TransactionState.CANCELLED.value, "cancelled_at": Now()}),
    message=message.CANCEL)

TABLE: tuple[TransactionTransition, ...] = (
    PREPARE, CLAIM_CHECK, RETRY_CHECK, CHECK_EXHAUSTED, CONFIRM, CANCEL)

# a message of a transaction: stored pending-send like a prepared one, never due on its own
PREPARE_MEMBER = Transition(
    "prepare-member", frozenset(), State.PENDING_SEND, Event.PREPARED,
    _frozen({"state": State.PENDING_SEND.value}))
