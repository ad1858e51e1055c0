"""Per-key ordering (design section 4, "Per-key ordering"): what the sequencer does with each
message of a key's queue, taken in confirm order.

The guarantee: the first publish of each ordered message happens after the first publish of
every message of its key confirmed before it, and never while an earlier one is held back: its
publish failed (waiting for the retry), its ack deadline passed (waiting for its redelivery) or
it is dead (until an operator resolves it) or it is delayed and its ``deliver_after`` has not
come. A message already published and inside its ack deadline does not hold back the ones
behind it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from rms.domain.models import Message


class Step(Enum):
    GO_ON = "go-on"  # published, ack deadline not passed: the next message may go
    PUBLISH = "publish"  # publish it now (a first publish or a redelivery), then go on
    HOLD = "hold"  # it holds back the rest of the key


@dataclass(frozen=True, slots=True)
class Queued:
    """A message of a key's queue. ``due``: its ``next_delivery_at`` passed; ``scheduled``:
    its ``deliver_after`` has not come (both by the database clock)."""

    message: Message
    due: bool
    scheduled: bool = False


def step(queued: Queued, cleared: bool) -> Step:
    """The step for one queued message. ``cleared``: the sequencer publishes a message before
    it in this pass, so a message that was waiting behind a blocked one may go right after it
    (never before its delivery time)."""
    message = queued.message
    if message.dead:
        return Step.HOLD
    in_flight = message.claim_token is not None
    if queued.due:
        return Step.PUBLISH
    if in_flight:
        return Step.HOLD
    if message.delivery_count > message.delivery_base:
        return Step.GO_ON
    return Step.PUBLISH if cleared and not queued.scheduled else Step.HOLD


def run_of(queue: Sequence[Queued]) -> tuple[list[Message], Message | None]:
    """The messages of a key's queue (in confirm order) to publish now, in order, assuming
    each publish is accepted, and the message that holds back the rest of the key (None:
    nothing does)."""
    run: list[Message] = []
    for queued in queue:
        what = step(queued, cleared=bool(run))
        if what is Step.HOLD:
            return run, queued.message
        if what is Step.PUBLISH:
            run.append(queued.message)
    return run, None
