"""Per-key ordering (design section 4, "Per-key ordering"): what the sequencer does with each
message of a key's queue, taken in confirm order.

The guarantee: the first publish of each ordered message happens after the first publish of
every message of its key confirmed before it, and never while an earlier one is held back: its
publish failed (waiting for the retry), its ack deadline passed (waiting for its redelivery) or
it is dead (until an operator resolves it). A message already published and inside its ack
deadline does not hold back the ones behind it.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from rms.domain.models import Message


class Step(Enum):
    GO_ON = "go-on"  # published, ack deadline not passed: the next message may go
    PUBLISH = "publish"  # publish it now (a first publish or a redelivery), then go on
    HOLD = "hold"  # it holds back the rest of the key


def step(message: Message, due: bool, cleared: bool) -> Step:
    """The step for one queued message. ``due``: its ``next_delivery_at`` passed (database
    clock); ``cleared``: the sequencer publishes a message before it in this pass, so a
    message that was waiting behind a blocked one may go right after it."""
    if message.dead:
        return Step.HOLD
    in_flight = message.claim_token is not None
    if due:
        return Step.PUBLISH
    if in_flight:
        return Step.HOLD
    if message.delivery_count > message.delivery_base:
        return Step.GO_ON
    return Step.PUBLISH if cleared else Step.HOLD


def run_of(queue: Sequence[tuple[Message, bool]]) -> tuple[list[Message], Message | None]:
    """The messages of a key's queue (``(message, due)`` in confirm order) to publish now, in
    order, assuming each publish is accepted, and the message that holds back the rest of the
    key (None: nothing does)."""
    run: list[Message] = []
    for message, due in queue:
        what = step(message, due, cleared=bool(run))
        if what is Step.HOLD:
            return run, message
        if what is Step.PUBLISH:
            run.append(message)
    return run, None
