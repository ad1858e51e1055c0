"""What an ack of a permitted consumer did (design section 3): ``recorded`` it, or why it
recorded nothing. Every ack that records nothing says so, in its answer (the ``RMS-Ack``
header of ``POST /v1/messages/{id}/ack``) and in ``rms_acks_not_recorded_total{via, reason}``,
so that a consumer whose acks count for nothing is never told, nor counted, as if they did."""

from __future__ import annotations

from typing import Literal

from rms.domain.models import Message
from rms.domain.states import State

Outcome = Literal["recorded", "repeated", "already-done", "not-a-subscriber", "not-sent",
                  "not-recorded"]
RECORDED: Outcome = "recorded"
# what an ack of a permitted consumer that recorded nothing can have met
UNRECORDED: tuple[Outcome, ...] = ("repeated", "already-done", "not-a-subscriber", "not-sent",
                                   "not-recorded")
# the statement recorded nothing where the row says it should have (an app whose topics an
# earlier release changed and that no process has repaired yet): logged and counted
NOT_RECORDED: Outcome = "not-recorded"


def unrecorded(message: Message, consumer: str) -> Outcome | None:
    """Why ``consumer``'s ack of ``message`` (as it stands) records nothing; None when it would
    record one (the consumer owes the message, or the single-ack rule applies to it)."""
    if consumer in message.acks:
        return "repeated"
    if message.state is State.DONE:
        return "already-done"
    if message.state is not State.SENT:
        return "not-sent"
    if message.subscribers is not None and consumer not in message.subscribers:
        return "not-a-subscriber"
    return None
