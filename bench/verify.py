"""The correctness check of every run: the contract (design sections 3 and 6) as the bench can
observe it. Pure: it judges a history given to it (tests feed it fabricated ones).

* every message whose confirm (or one-shot send, or committed check-back) succeeded must be
  ``done`` with ``confirmed_at <= done_at``, have at least one ``published`` event and exactly
  one ``acked`` event, and have reached the consumer on Kafka at least once;
* every message whose cancel succeeded must be ``deleted``, with no ``published`` event, and
  must never have reached the consumer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

CONFIRMED, CANCELLED = "confirmed", "cancelled"
SAMPLES = 10


@dataclass(frozen=True)
class Stored:
    """One message as the database holds it (times are epoch seconds)."""

    message_id: str
    state: str
    published: int
    created_at: float
    confirmed_at: float | None
    done_at: float | None
    acked: int = 1  # ``acked`` events: exactly one for a done message


@dataclass
class Verdict:
    checked: int = 0
    problems: int = 0
    samples: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.problems == 0

    def fail(self, message: str) -> None:
        self.problems += 1
        if len(self.samples) < SAMPLES:
            self.samples.append(message)

    def as_dict(self) -> dict[str, object]:
        return {"passed": self.passed, "checked": self.checked, "problems": self.problems,
                "samples": self.samples}


def _confirmed(message_id: str, stored: Stored | None, received: bool, acks: int = 1
               ) -> str | None:
    if stored is None:
        return f"{message_id}: confirmed but not in the database (lost)"
    if stored.state != "done" or stored.done_at is None:
        return f"{message_id}: confirmed but state is {stored.state!r}, not done"
    if stored.published < 1:
        return f"{message_id}: done without a published event"
    if stored.acked != acks:
        return (f"{message_id}: {stored.acked} acked events ({acks} expected: one per "
                "subscriber, the last one the transition to done)")
    if stored.confirmed_at is None or stored.confirmed_at > stored.done_at:
        return f"{message_id}: done_at before confirmed_at (or no confirmed_at)"
    if not received:
        return f"{message_id}: done but never received from Kafka"
    return None


def _cancelled(message_id: str, stored: Stored | None, received: bool) -> str | None:
    if stored is None:
        return f"{message_id}: cancelled but not in the database"
    if stored.state != "deleted":
        return f"{message_id}: cancelled but state is {stored.state!r}"
    if stored.published or received:
        return f"{message_id}: cancelled but published ({stored.published} events, " \
               f"received={received})"
    return None


def verify(expected: Mapping[str, str], stored: Mapping[str, Stored],
           received: Mapping[str, object], acks: int = 1) -> Verdict:
    """``expected``: message id -> ``confirmed`` / ``cancelled`` (what the producer was told);
    ``stored``: what the database holds; ``received``: ids the consumer got from Kafka;
    ``acks``: the subscribers of each message, each acking it once."""
    verdict = Verdict()
    for message_id, outcome in expected.items():
        verdict.checked += 1
        problem = (_confirmed(message_id, stored.get(message_id), message_id in received, acks)
                   if outcome == CONFIRMED
                   else _cancelled(message_id, stored.get(message_id), message_id in received))
        if problem is not None:
            verdict.fail(problem)
    return verdict
