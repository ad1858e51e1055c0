"""A check-back answer and what it does (design section 5): the one rule that turns a
producer's answer into the action on what was asked about, a message or a transaction alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from rms.domain.policy import DeliveryPolicy, next_check_delay


class Outcome(StrEnum):
    """A producer's answer; anything else (an error, no answer in time) counts as
    ``unknown``."""

    COMMITTED = "committed"
    ROLLED_BACK = "rolled_back"
    UNKNOWN = "unknown"


class Action(StrEnum):
    """What a check-back answer does to what it asked about."""

    CONFIRM = "confirm"  # committed: the confirm transition
    CANCEL = "cancel"  # rolled_back: the cancel transition
    RETRY = "retry"  # unknown with calls left: due again after a delay
    EXHAUST = "exhaust"  # unknown on the last call: flagged dead


@dataclass(frozen=True, slots=True)
class Asked:
    """What a check-back call was about, as the rule needs it: ``check_count`` already counts
    this call."""

    check_count: int
    max_checks: int
    check_after_seconds: float


def decide(outcome: Outcome, asked: Asked, backoff_cap_seconds: float) -> tuple[Action, float]:
    """The action for ``outcome``, and for a retry after how many seconds. The last allowed
    call that answers ``unknown`` exhausts."""
    if outcome is Outcome.COMMITTED:
        return Action.CONFIRM, 0.0
    if outcome is Outcome.ROLLED_BACK:
        return Action.CANCEL, 0.0
    if asked.check_count >= asked.max_checks:
        return Action.EXHAUST, 0.0
    policy = DeliveryPolicy(check_after_seconds=asked.check_after_seconds,
                            check_backoff_cap_seconds=backoff_cap_seconds)
    return Action.RETRY, next_check_delay(policy, asked.check_count)
