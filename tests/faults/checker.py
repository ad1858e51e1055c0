"""The fault suite's invariants, checked over a recorded :class:`History` and the database's
:class:`Final` state. Pure functions: no I/O, so ``test_checker.py`` proves each one fires.

* **loss**: every 2xx answer survives (a prepared message exists, a confirmed one is sent or
  done, a cancelled one deleted, an acked one done); everything confirmed by the producer or
  by a check-back answered ``committed`` ends ``done`` (after a record reached the consumer) or
  dead with a reason;
* **phantom**: nothing whose local transaction did not commit, nothing cancelled and nothing
  never confirmed is ever published or consumed;
* **duplicates**: per message, at most ``max_deliveries`` publishes and delivery numbers;
* **transition**: the event history replays through legal transitions only, to the stored
  state, and no two 2xx answers contradict each other (confirmed and cancelled);
* **liveness**: once faults healed and the retry budget passed, every message is settled
  (done, deleted or dead);
* **isolation**: an app never sees or changes another app's message.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tests.faults.history import COMMITTED, Consumed, Final, FinalMessage, History, Op, StoredEvent

KINDS = ("loss", "phantom", "duplicates", "transition", "liveness", "isolation")

# event -> (required state before, state after)
STATE_EVENTS: dict[str, tuple[str | None, str]] = {
    "prepared": (None, "pending-send"),
    "sent": (None, "sent"),
    "confirmed": ("pending-send", "sent"),
    "cancelled": ("pending-send", "deleted"),
    "acked": ("sent", "done"),
}
DEAD_REASON_FOR = {"pending-send": "check-exhausted", "sent": "delivery-exhausted"}
# a 2xx answer to these ops promises these states at the end
SURVIVES = {"confirm": {"sent", "done"}, "cancel": {"deleted"}, "ack": {"done"}}


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str
    message_id: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.message_id}: {self.detail}"


def check(history: History, final: Final) -> list[Violation]:
    """Every violation found (empty: the run kept every invariant)."""
    events = _by_message(final.events)
    found = [
        *_loss(history, final),
        *_phantom(history, final, events),
        *_duplicates(history, final, events),
        *_transitions(history, final, events),
        *_liveness(final),
        *_isolation(history, final),
    ]
    return sorted(found, key=lambda v: (KINDS.index(v.kind), v.message_id, v.detail))


def summary(violations: Iterable[Violation]) -> dict[str, int]:
    counts = dict.fromkeys(KINDS, 0)
    for violation in violations:
        counts[violation.kind] += 1
    return counts


def _by_message(events: Iterable[StoredEvent]) -> dict[str, list[StoredEvent]]:
    grouped: dict[str, list[StoredEvent]] = defaultdict(list)
    for event in events:
        grouped[event.message_id].append(event)
    return grouped


# ---- loss ---------------------------------------------------------------------------------


def _loss(history: History, final: Final) -> Iterator[Violation]:
    yield from _answers_survive(history.ops, final)
    consumed = {record.message_id for record in history.consumed}
    for message_id in sorted(_must_deliver(history, final)):
        yield from _delivered(message_id, final.messages.get(message_id), consumed)


def _answers_survive(ops: Iterable[Op], final: Final) -> Iterator[Violation]:
    for op in ops:
        if not op.ok or op.kind not in {"prepare", *SURVIVES}:
            continue
        message = final.messages.get(op.message_id)
        if message is None:
            yield Violation("loss", op.message_id, f"{op.kind} answered {op.status} but the "
                                                   "message is not stored")
        elif op.kind in SURVIVES and message.state not in SURVIVES[op.kind]:
            yield Violation("loss", op.message_id, f"{op.kind} answered {op.status} "
                                                   f"({op.state}) but the message ends "
                                                   f"{message.state}")


def _must_deliver(history: History, final: Final) -> set[str]:
    """Confirmed by the producer (2xx), by a check-back the producer answered committed, or
    stored with the producer's transaction committed (whatever was answered)."""
    confirmed = {op.message_id for op in history.ops if op.kind == "confirm" and op.ok}
    checked = {a.message_id for a in history.answers if a.status == COMMITTED}
    committed = {m for m, truth in history.truth.items()
                 if truth == COMMITTED and m in final.messages}
    return confirmed | checked | committed


def _delivered(message_id: str, message: FinalMessage | None, consumed: set[str]
               ) -> Iterator[Violation]:
    if message is None:
        yield Violation("loss", message_id, "confirmed but not stored")
    elif message.dead and message.dead_reason:
        return
    elif message.state != "done":
        yield Violation("loss", message_id, f"confirmed but ends {message.state}, not done "
                                            "and not dead")
    elif message_id not in consumed:
        yield Violation("loss", message_id, "done but no consumer ever read a record of it")


# ---- phantom ------------------------------------------------------------------------------


def _phantom(history: History, final: Final, events: dict[str, list[StoredEvent]]
             ) -> Iterator[Violation]:
    published = {e.message_id for e in final.events if e.event == "published"}
    read = {record.message_id for record in history.consumed}
    for message_id in sorted(published | read):
        how = "consumed" if message_id in read else "published"
        truth = history.truth.get(message_id)
        if truth != COMMITTED:
            yield Violation("phantom", message_id, f"{how} but the producer's transaction is "
                                                   f"{truth or 'unknown to the producer'}")
        names = {e.event for e in events.get(message_id, [])}
        if not names & {"confirmed", "sent"} or "cancelled" in names:
            yield Violation("phantom", message_id, f"{how} but never confirmed, or cancelled "
                                                   f"(events: {sorted(names)})")


# ---- duplicates ---------------------------------------------------------------------------


def _duplicates(history: History, final: Final, events: dict[str, list[StoredEvent]]
                ) -> Iterator[Violation]:
    numbers: dict[str, set[int]] = defaultdict(set)
    for record in history.consumed:
        numbers[record.message_id].add(record.delivery)
    for message_id, message in sorted(final.messages.items()):
        publishes = sum(1 for e in events.get(message_id, []) if e.event == "published")
        seen = numbers.get(message_id, set())
        limit = message.max_deliveries
        if publishes > limit:
            yield Violation("duplicates", message_id, f"{publishes} publishes recorded; "
                                                      f"max_deliveries is {limit}")
        if len(seen) > limit or max(seen, default=0) > limit:
            yield Violation("duplicates", message_id, f"delivery numbers {sorted(seen)} "
                                                      f"consumed; max_deliveries is {limit}")


# ---- transitions --------------------------------------------------------------------------


def _transitions(history: History, final: Final, events: dict[str, list[StoredEvent]]
                 ) -> Iterator[Violation]:
    for message_id, message in sorted(final.messages.items()):
        yield from _replay(message, events.get(message_id, []))
    yield from _contradictions(history.ops)


def _replay(message: FinalMessage, events: list[StoredEvent]) -> Iterator[Violation]:
    state: str | None = None
    for event in events:
        if event.event == "dead":
            yield from _dead_event(message.message_id, state, event)
        if event.event not in STATE_EVENTS:
            continue
        source, target = STATE_EVENTS[event.event]
        if state != source:
            yield Violation("transition", message.message_id,
                            f"{event.event} by {event.actor} from {state or '(new)'}")
        state = target
    if state != message.state:
        yield Violation("transition", message.message_id,
                        f"history ends {state or '(new)'} but the row says {message.state}")
    if message.dead and DEAD_REASON_FOR.get(message.state) != message.dead_reason:
        yield Violation("transition", message.message_id,
                        f"dead ({message.dead_reason}) in state {message.state}")


def _dead_event(message_id: str, state: str | None, event: StoredEvent) -> Iterator[Violation]:
    reason = event.detail.get("reason")
    if state is None or DEAD_REASON_FOR.get(state) != reason:
        yield Violation("transition", message_id, f"dead ({reason}) in state {state}")


def _contradictions(ops: Iterable[Op]) -> Iterator[Violation]:
    outcomes: dict[str, set[str]] = defaultdict(set)
    for op in ops:
        if op.ok and op.kind in {"confirm", "cancel"}:
            outcomes[op.message_id].add(op.kind)
    for message_id, kinds in sorted(outcomes.items()):
        if len(kinds) > 1:
            yield Violation("transition", message_id, "both confirm and cancel answered 2xx")


# ---- liveness -----------------------------------------------------------------------------


def _liveness(final: Final) -> Iterator[Violation]:
    for message_id, message in sorted(final.messages.items()):
        if message.settled:
            continue
        when = ("nothing scheduled" if message.overdue is None
                else f"{message.overdue:+.1f}s past its due time")
        yield Violation("liveness", message_id, f"still {message.state} after faults healed "
                                                f"and the retry budget passed ({when})")


# ---- isolation ----------------------------------------------------------------------------


def _isolation(history: History, final: Final) -> Iterator[Violation]:
    for op in history.ops:
        yield from _op_isolation(op)
    for record in history.consumed:
        yield from _record_isolation(record, final.messages.get(record.message_id))
    for event in final.events:
        yield from _actor_isolation(event, final.messages.get(event.message_id),
                                    history.consumers)


def _op_isolation(op: Op) -> Iterator[Violation]:
    if op.kind == "probe" and op.status is not None and op.status < 500 and op.status not in {
            404, 429}:  # a 5xx or 429 tells nothing; anything else tells the message exists
        yield Violation("isolation", op.message_id,
                        f"app {op.app} reached another app's message: {op.status}")
    if op.ok and op.kind not in {"ack", "probe"} and op.owner not in {None, op.app}:
        yield Violation("isolation", op.message_id,
                        f"app {op.app}'s {op.kind} answered with {op.owner}'s message")


def _record_isolation(record: Consumed, message: FinalMessage | None) -> Iterator[Violation]:
    if message is not None and (record.app, record.topic) != (message.app, message.topic):
        yield Violation("isolation", record.message_id,
                        f"record says {record.app}/{record.topic}, the message is "
                        f"{message.app}/{message.topic}")


def _actor_isolation(event: StoredEvent, message: FinalMessage | None, consumers: set[str]
                     ) -> Iterator[Violation]:
    if message is None or not event.actor.startswith("app:"):
        return
    actor = event.actor.removeprefix("app:")
    allowed = {message.app} | (consumers if event.event == "acked" else set())
    if actor not in allowed:
        yield Violation("isolation", event.message_id,
                        f"{event.event} by app {actor} on {message.app}'s message")
