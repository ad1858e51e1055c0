"""The transition table (design section 3): every change a message row can undergo, held as
data: the changes of state, the check-back retry, the dead flags, the workers' claims and the
publish outcomes.

A :class:`Transition` names the states it starts from, the state it leaves the message in, the
event it appends, the states in which a repeat answers "already there" (200 with the message
as it is), and its column effects. The store renders both of its SQL forms (SQLAlchemy values
and the SET clause of the coalesced statements) from these effects, so a transition is defined
here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from rms.domain import phase
from rms.domain.states import DeadReason, Event, State


@dataclass(frozen=True, slots=True)
class Now:
    """The database clock when the statement runs."""


@dataclass(frozen=True, slots=True)
class Column:
    """The row's value of ``name`` before the change."""

    name: str


@dataclass(frozen=True, slots=True)
class Given:
    """A value the statement supplies per row (a lease, a retry delay)."""

    name: str


@dataclass(frozen=True, slots=True)
class Plus:
    """The row's ``name`` before the change, plus ``by``."""

    name: str
    by: int


@dataclass(frozen=True, slots=True)
class Later:
    """The database clock plus ``seconds`` (a column of the row, a given value, or the setting
    the row's subscribers are owed)."""

    seconds: Column | Given | OwedSetting


@dataclass(frozen=True, slots=True)
class NextInSequence:
    """The next value of the database sequence ``name`` (taken when the statement runs)."""

    name: str


@dataclass(frozen=True, slots=True)
class Subscribers:
    """The apps whose ``consume_topics`` match the row's topic, by name, as the ``apps`` table
    says when the statement runs (NULL when none: the single-ack rule, design section 3)."""


@dataclass(frozen=True, slots=True)
class OwedSetting:
    """The delivery setting ``name`` (``max_deliveries`` or ``ack_timeout_seconds``) the row's
    subscribers are owed, as the ``apps`` table says when the statement runs: the largest of
    each subscriber app's own setting, or the row's for a subscriber that has none; the row's
    own when it has no subscribers (design section 7)."""

    name: str


@dataclass(frozen=True, slots=True)
class AckAdded:
    """The row's ``acks`` with the ack of the consumer the statement names (its given value
    ``consumer``) added: ``{"at": <database clock, RFC 3339 UTC>, "via": <given "via">}``."""

    consumer: str = "consumer"
    via: str = "via"


@dataclass(frozen=True, slots=True)
class When:
    """``then`` for a row for which the delivery phase's ``term`` holds (on the row before the
    change, database clock), else ``otherwise``: the one conditional effect, in the
    vocabulary of :mod:`rms.domain.phase`."""

    term: phase.Term
    then: Effect
    otherwise: Effect


Effect = (None | bool | int | str | Now | Column | Given | Plus | Later | NextInSequence
          | Subscribers | OwedSetting | AckAdded | When)


def chosen(effect: Effect, holds: Callable[[phase.Term], bool]) -> Effect:
    """The effect a row gets: every :class:`When` resolved by ``holds`` (whether a term holds
    for the row), so a table can be read out per kind of row."""
    while isinstance(effect, When):
        effect = effect.then if holds(effect.term) else effect.otherwise
    return effect


@dataclass(frozen=True, slots=True)
class Transition:
    """One guarded change. ``sources``: the states it applies to (empty: a new row);
    ``dead``: the ``dead`` flag it requires (None: either); ``event``: the history row it
    appends (None: the caller's own event, as a check-back's ``checked``); ``already``: states
    in which a repeat is answered with the message as it is; ``alone``: applies to a message
    only outside a transaction (a transaction's messages change together, see
    :mod:`rms.domain.transactions`); ``reserves``: it may reserve a delivery (a row it leaves
    :data:`rms.domain.phase.RESERVED` got one), and its statement then appends that delivery's
    ``publishing`` event, which the broker's answer completes."""

    action: str
    sources: frozenset[State]
    target: State
    event: Event | None
    effects: Mapping[str, Effect]
    already: frozenset[State] = frozenset()
    dead: bool | None = None
    alone: bool = False
    reserves: bool = False

    @property
    def source(self) -> State:
        """The one state a guarded ``UPDATE`` matches (every stored-row transition has one)."""
        [source] = self.sources
        return source


def _frozen(effects: dict[str, Effect]) -> Mapping[str, Effect]:
    return MappingProxyType(effects)


_ALIVE: dict[str, Effect] = {"dead": False, "dead_reason": None, "claim_token": None}


# Per-key ordering: an ordered message is not published by the statement that confirms (or
# resends) it. It gets no delivery reserved and is due at once; the ordering sequencer (in the
# redelivery worker) reserves its delivery and publishes it in confirm order (``confirm_seq``)
# per key. The phase a row is in after these effects is read through :mod:`rms.domain.phase`.
CONFIRM_SEQUENCE = "messages_confirm_seq"
_ORDERED = phase.ORDERED
_CONFIRM_ORDER: dict[str, Effect] = {
    "confirm_seq": When(_ORDERED, NextInSequence(CONFIRM_SEQUENCE), None)}
_NEXT_DELIVERY_UNLESS_ORDERED: dict[str, Effect] = {
    "delivery_count": When(_ORDERED, Column("delivery_count"), Plus("delivery_count", 1)),
    "next_delivery_at": When(_ORDERED, Now(), Later(Column("ack_timeout_seconds"))),
}
# Delayed delivery: a confirm (or one-shot send) before the message's ``deliver_after`` reserves
# nothing either; the message is due at that time (an ordered one then waits for its turn too).
_FIRST_DUE = When(phase.SCHEDULED, Column("deliver_after"),
                  When(_ORDERED, Now(), Later(OwedSetting("ack_timeout_seconds"))))
# a confirm gives the message the delivery settings its subscribers are owed (design section 7)
_OWED_SETTINGS: dict[str, Effect] = {
    "max_deliveries": OwedSetting("max_deliveries"),
    "ack_timeout_seconds": OwedSetting("ack_timeout_seconds"),
}
_FIRST_DELIVERY: dict[str, Effect] = {
    "delivery_count": When(_ORDERED, Column("delivery_count"),
                           When(phase.SCHEDULED, Column("delivery_count"),
                                Plus("delivery_count", 1))),
    "next_delivery_at": _FIRST_DUE,
}


def _into(target: State, **effects: Effect) -> dict[str, Effect]:
    return {"state": target.value, **_ALIVE, **effects}


PREPARE = Transition(
    "prepare", frozenset(), State.PENDING_SEND, Event.PREPARED,
    _frozen({"state": State.PENDING_SEND.value,
             "next_check_at": Later(Column("check_after_seconds"))}))
# a confirm fixes the message's subscribers (design section 3)
SEND = Transition(
    "send", frozenset(), State.SENT, Event.SENT,
    _frozen({"state": State.SENT.value, "confirmed_at": Now(), "subscribers": Subscribers(),
             "delivery_count": When(_ORDERED, 0, When(phase.SCHEDULED, 0, 1)),
             "next_delivery_at": _FIRST_DUE, **_OWED_SETTINGS,
             **_CONFIRM_ORDER}), reserves=True)
CONFIRM = Transition(
    "confirm", frozenset({State.PENDING_SEND}), State.SENT, Event.CONFIRMED,
    _frozen(_into(State.SENT, confirmed_at=Now(), next_check_at=None, **_FIRST_DELIVERY,
                  **_CONFIRM_ORDER, **_OWED_SETTINGS, subscribers=Subscribers())),
    already=frozenset({State.SENT, State.DONE}), alone=True, reserves=True)
# a transaction's confirm of its messages: the confirm, and the first publishes it reserves
# claimed (``claim_token``, the confirm's own token) until the broker's answers are recorded, so
# no other first publish of the transaction overtakes them, also after a crash of the
# confirming process (:data:`rms.domain.phase.HELD_FOR_ORDER`)
CONFIRM_CLAIMED = Transition(
    "confirm-claimed", frozenset({State.PENDING_SEND}), State.SENT, Event.CONFIRMED,
    _frozen({**CONFIRM.effects, "claim_token": Given("token")}),
    already=frozenset({State.SENT, State.DONE}), reserves=True)
CANCEL = Transition(
    "cancel", frozenset({State.PENDING_SEND}), State.DELETED, Event.CANCELLED,
    _frozen(_into(State.DELETED, deleted_at=Now(), next_check_at=None)),
    already=frozenset({State.DELETED}), alone=True)
def _finished_by(term: phase.Term, finished: dict[str, Effect]) -> dict[str, Effect]:
    """Each of ``finished``'s effects for a row for which ``term`` holds; the others keep
    their value."""
    return {name: When(term, effect, Column(name)) for name, effect in finished.items()}


# an ack records the consumer's ack; the last one owed (every other subscriber acked, or the
# single-ack rule) finishes the message. Its statement applies it only where the ack counts
# (:data:`rms.domain.phase.ACK_COUNTS`): a repeat or a non-subscriber's ack changes nothing.
ACK = Transition(
    "ack", frozenset({State.SENT}), State.DONE, Event.ACKED,
    _frozen({"acks": AckAdded(),
             **_finished_by(phase.LAST_ACK,
                            _into(State.DONE, done_at=Now(), next_delivery_at=None))}),
    already=frozenset({State.DONE}))
# a consumer released from a message it owes (its app deleted, or its consume_topics no longer
# matching the topic): ``remaining``, the subscribers without it; a message whose remaining
# subscribers all acked (or none remain) is done. Its statement applies it only where the
# consumer owes the message (:data:`rms.domain.phase.OWES`).
RELEASE = Transition(
    "release", frozenset({State.SENT}), State.DONE, Event.RELEASED,
    _frozen({"subscribers": Given("remaining"),
             **_finished_by(phase.LAST_ACK,
                            _into(State.DONE, done_at=Now(), next_delivery_at=None))}))
RESEND = Transition(
    "resend", frozenset({State.SENT}), State.SENT, Event.RESENT,
    _frozen({**_ALIVE, "delivery_base": Column("delivery_count"), "exhausted": None,
             **_NEXT_DELIVERY_UNLESS_ORDERED}), reserves=True)
RETRY_CHECK = Transition(
    "retry-check", frozenset({State.PENDING_SEND}), State.PENDING_SEND, None,
    _frozen({"claim_token": None, "next_check_at": Later(Given("delay"))}))
CHECK_EXHAUSTED = Transition(
    "check-exhausted", frozenset({State.PENDING_SEND}), State.PENDING_SEND, Event.DEAD,
    _frozen({"dead": True, "dead_reason": DeadReason.CHECK_EXHAUSTED.value,
             "next_check_at": None, "claim_token": None}))
DELIVERY_EXHAUSTED = Transition(
    "delivery-exhausted", frozenset({State.SENT}), State.SENT, Event.DEAD,
    _frozen({"dead": True, "dead_reason": DeadReason.DELIVERY_EXHAUSTED.value,
             "claim_token": None, "next_delivery_at": None}),
    dead=False)

# claims and publish outcomes: a worker's lease on a message, and what the broker said
CLAIM_CHECK = Transition(
    "claim-check", frozenset({State.PENDING_SEND}), State.PENDING_SEND, None,
    _frozen({"next_check_at": Later(Given("lease")), "claim_token": Given("token"),
             "check_count": Plus("check_count", 1)}),
    dead=False)
CLAIM_DELIVERY = Transition(
    "claim-delivery", frozenset({State.SENT}), State.SENT, None,
    _frozen({"delivery_count": Plus("delivery_count", 1), "claim_token": Given("token"),
             "next_delivery_at": Later(Given("lease")), "exhausted": Given("exhausted")}),
    dead=False, reserves=True)
PUBLISH_ACCEPTED = Transition(
    "publish-accepted", frozenset({State.SENT}), State.SENT, None,
    _frozen({"next_delivery_at": Later(Given("due")), "claim_token": None,
             "publish_failure": None, "published_delivery": Column("delivery_count")}))
PUBLISH_REFUSED = Transition(
    "publish-refused", frozenset({State.SENT}), State.SENT, None,
    _frozen({"delivery_count": Plus("delivery_count", -1), "claim_token": None,
             "next_delivery_at": Later(Given("retry")), "publish_failure": Given("reason"),
             "published_delivery": None}))

# the sequencer claimed a run of a key's messages and stopped before publishing this one (an
# earlier one of the run failed): its reserved number is given back, no publish was attempted
RELEASE_DELIVERY = Transition(
    "release-delivery", frozenset({State.SENT}), State.SENT, None,
    _frozen({"delivery_count": Plus("delivery_count", -1), "claim_token": None,
             "next_delivery_at": Now()}))

# the ordering sequencer found a key held back: the due messages queued behind the message
# holding it (:data:`rms.domain.phase.QUEUED`) are looked at again after ``delay`` seconds
HOLD_IN_LINE = Transition(
    "hold-in-line", frozenset({State.SENT}), State.SENT, None,
    _frozen({"next_delivery_at": Later(Given("delay"))}))

TABLE: tuple[Transition, ...] = (
    PREPARE, SEND, CONFIRM, CONFIRM_CLAIMED, CANCEL, ACK, RELEASE, RESEND, RETRY_CHECK,
    CHECK_EXHAUSTED,
    DELIVERY_EXHAUSTED, CLAIM_CHECK, CLAIM_DELIVERY, PUBLISH_ACCEPTED, PUBLISH_REFUSED,
    RELEASE_DELIVERY, HOLD_IN_LINE)


def new_message(one_shot: bool) -> Transition:
    """A prepare stores ``pending-send``; a one-shot send stores ``sent`` (first delivery
    reserved, or for an ordered message a confirm sequence number and no delivery yet)."""
    return SEND if one_shot else PREPARE

