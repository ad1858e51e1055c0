"""The states and events of the message state machine (design section 3); the changes between
them are the table in :mod:`rms.domain.transitions`."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType


class State(StrEnum):
    PENDING_SEND = "pending-send"
    SENT = "sent"
    DONE = "done"
    DELETED = "deleted"


class DeadReason(StrEnum):
    CHECK_EXHAUSTED = "check-exhausted"
    DELIVERY_EXHAUSTED = "delivery-exhausted"


class Event(StrEnum):
    """Names written to the append-only ``message_events`` table.

    The Spark report reads these names; they are part of the data contract.
    """

    PREPARED = "prepared"  # (new) -> pending-send
    SENT = "sent"  # (new) -> sent, one-shot send
    CONFIRMED = "confirmed"  # pending-send -> sent (actor tells producer / check-back / admin)
    CANCELLED = "cancelled"  # pending-send -> deleted (actor tells producer / check-back / admin)
    # a delivery reserved and handed to the broker; detail {"delivery": n}. Appended by the
    # statement that reserves the delivery (before the publish, so before any ack of it) and
    # completed in place by the broker's answer into ``published`` or ``publish-failed``; it
    # stays ``publishing`` only when that answer was lost with its process
    PUBLISHING = "publishing"
    PUBLISHED = "published"  # broker accepted a record; detail {"delivery": n}
    PUBLISH_FAILED = "publish-failed"  # broker refused or timed out; detail {"delivery", "error"}
    # a reserved delivery the ordering sequencer gave back without handing it to the broker
    # (an earlier message of the key's run was not published): its ``publishing`` event
    # completed in place; detail {"delivery", "reason"}
    WITHDRAWN = "withdrawn"
    ACKED = "acked"  # a consumer's ack; detail {"via", "done"} (done: it finished the message)
    # an ack by an app that may consume the topic but is not a subscriber; detail
    # {"via", "reason": "not-a-subscriber"}
    ACK_IGNORED = "ack-ignored"
    # a consumer removed from the subscribers (app deleted or unsubscribed); detail
    # {"consumer", "reason", "done"}
    RELEASED = "released"
    CHECKED = "checked"  # a check-back call; detail {"attempt", "outcome"}
    DEAD = "dead"  # flagged dead; detail {"reason"}
    RESENT = "resent"  # admin resend; detail {"delivery"}


TERMINAL_STATES = frozenset({State.DONE, State.DELETED})
# the states a message can still leave (the ones retention never removes)
OPEN_STATES = frozenset(State) - TERMINAL_STATES
# the column that records when a message reached each terminal state
FINISHED_AT: Mapping[State, str] = MappingProxyType(
    {State.DONE: "done_at", State.DELETED: "deleted_at"})
