"""Per-key ordering (design section 4, "Per-key ordering"): the head-of-line rule, what the
sequencer does with each message of a key's queue, taken in confirm order, and why a key is
held back (the operator's blocked-keys view). All three are written in the delivery phase's
predicates (:mod:`rms.domain.phase`), so the sequencer and the view apply the same rule.

The guarantee: the first publish of each ordered message happens after the first publish of
every message of its key confirmed before it, and never while an earlier one is held back: its
publish failed (waiting for the retry), its ack deadline passed (waiting for its redelivery) or
it is dead (until an operator resolves it) or it is delayed and its ``deliver_after`` has not
come. A message already published and inside its ack deadline does not hold back the ones
behind it (:data:`~rms.domain.phase.HOLDS_LINE`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum, StrEnum

from rms.domain import phase
from rms.domain.models import Message
from rms.domain.states import Event


class Step(Enum):
    GO_ON = "go-on"  # published, ack deadline not passed: the next message may go
    PUBLISH = "publish"  # publish it now (a first publish or a redelivery), then go on
    HOLD = "hold"  # it holds back the rest of the key


# the step of a message that holds its line, the first matching row wins (none: it waits for
# its turn, see :func:`step`)
STEPS: tuple[tuple[phase.Term, Step], ...] = (
    (phase.DEAD, Step.HOLD),
    (phase.DUE, Step.PUBLISH),
    (phase.IN_FLIGHT, Step.HOLD),
)


class Blocked(StrEnum):
    """Why a key is held back by its head (the operator's blocked-keys view)."""

    DEAD = "dead"  # until an operator resolves it
    AWAITING_REDELIVERY = "awaiting-redelivery"  # its ack deadline passed
    SCHEDULED = "scheduled"  # delayed, its deliver_after not come
    HELD_FOR_ORDER = "held-for-order"  # an earlier message of its transaction not published
    PUBLISH_FAILED = "publish-failed"  # waiting for its retry


# why a key whose head (its first message that holds the line) holds back the rest, the first
# matching row wins; a reason of None: not blocked (a publish in flight inside its lease)
BLOCKED_BY: tuple[tuple[phase.Term, Blocked | None], ...] = (
    (phase.DEAD, Blocked.DEAD),
    (phase.All((phase.IN_FLIGHT, phase.Not(phase.DUE))), None),
    (phase.All((phase.RESERVED, phase.DUE)), Blocked.AWAITING_REDELIVERY),
    (phase.All((phase.Not(phase.RESERVED), phase.SCHEDULED)), Blocked.SCHEDULED),
    (phase.All((phase.Not(phase.RESERVED), phase.HELD_FOR_ORDER)), Blocked.HELD_FOR_ORDER),
    (phase.LastEvent(Event.PUBLISH_FAILED), Blocked.PUBLISH_FAILED),
)


@dataclass(frozen=True, slots=True)
class Queued:
    """A message of a key's queue, with the database clock ``now`` when it was read."""

    message: Message
    now: datetime

    def holds(self, term: phase.Term) -> bool:
        return phase.holds(term, self.message, self.now)


def step(queued: Queued, cleared: bool) -> Step:
    """The step for one queued message. ``cleared``: the sequencer publishes a message before
    it in this pass, so a message that was waiting behind a blocked one may go right after it
    (never before its delivery time)."""
    if not queued.holds(phase.HOLDS_LINE):
        return Step.GO_ON
    for term, what in STEPS:
        if queued.holds(term):
            return what
    return Step.PUBLISH if cleared and not queued.holds(phase.SCHEDULED) else Step.HOLD


def run_of(queue: Sequence[Queued]) -> tuple[list[Message], Message | None]:
    """The messages of a key's queue (in confirm order) to publish now, in order, assuming
    each publish is accepted, and the message that holds back the rest of the key (None:
    nothing does). A message whose last publish was refused ends the run: it is tried again
    before a delivery of anything behind it is reserved, so a key stays blocked without
    reserving (and withdrawing) the deliveries of its whole queue on every retry."""
    run: list[Message] = []
    for queued in queue:
        what = step(queued, cleared=bool(run))
        if what is Step.HOLD:
            return run, queued.message
        if what is Step.PUBLISH:
            run.append(queued.message)
            if queued.message.publish_failure is not None:
                return run, None
    return run, None
