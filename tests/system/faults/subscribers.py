"""The invariants of a message read by several consumer apps (design sections 3 and 6), over a
recorded :class:`History` and the :class:`Final` state. Pure functions, proved to fire by
``tests/unit/test_fault_checker_subscribers.py``. A message whose ``subscribers`` are NULL
follows the single-ack rule and is left to the single-message invariants.

* **fan-out**: a confirmed message's subscribers are exactly the scenario's consumer apps
  whose topics match it, and each of them read at least one record of it once it settled;
* **all-acked**: a message is ``done`` only after every subscriber acked: no ``acked`` event
  says ``done`` while another subscriber still owes its ack, and a ``done`` row holds every
  subscriber's ack;
* **stand-in**: one consumer's ack never stands in for another's: only a subscriber's ack is
  an ``acked`` event (anyone else's is ``ack-ignored``), never twice, each recorded ack has its
  event, a subscriber's ack answered 2xx is in the row at the end, and a record's
  ``rms-awaiting`` leaves out only subscribers that had acked before it was published;
* **dead-per-consumer**: a ``dead`` event names exactly the subscribers still owing then, the
  others' acks stand, and a consumer that never acks ends each of its messages dead naming it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from tests.system.faults.history import Final, FinalMessage, History, StoredEvent, Violation

KINDS = ("fan-out", "all-acked", "stand-in", "dead-per-consumer")
ACK_CLOCK = 0.001  # record timestamps are whole milliseconds (an ack's time is not)


@dataclass(frozen=True, slots=True)
class Facts:
    """What the single-message checks already worked out: the messages that must be delivered
    (confirmed) and those held behind a dead one, and each message's events in id order."""

    must_deliver: set[str]
    held: set[str]
    events: Mapping[str, list[StoredEvent]]


def check_subscribers(history: History, final: Final, facts: Facts) -> Iterator[Violation]:
    """Every violation of the four invariants (``final`` merged with the archive)."""
    with_subscribers = {i: m for i, m in final.messages.items() if m.subscribers is not None}
    yield from _fan_out(history, with_subscribers, facts)
    for message_id, message in sorted(with_subscribers.items()):
        events = facts.events.get(message_id, [])
        yield from _all_acked(message, events)
        yield from _stand_in(message, events)
        yield from _dead_per_consumer(message, events)
    yield from _acks_sent(history, with_subscribers, facts)
    yield from _acks_answered(history, with_subscribers)
    yield from _awaiting(history, with_subscribers, facts)
    yield from _silent(history, with_subscribers, facts)


def _actor(event: StoredEvent) -> str:
    return event.actor.removeprefix("app:")


def _subscribers(message: FinalMessage) -> set[str]:
    return set(message.subscribers or ())


def _confirmed_with(message: FinalMessage, events: list[StoredEvent]) -> set[str]:
    """The subscribers at confirm: the row's and those released since (removed from it)."""
    return _subscribers(message) | {str(e.detail.get("consumer")) for e in events
                                    if e.event == "released"}


# ---- fan-out ------------------------------------------------------------------------------


def _fan_out(history: History, messages: Mapping[str, FinalMessage], facts: Facts
             ) -> Iterator[Violation]:
    readers: dict[str, set[str]] = defaultdict(set)
    for record in history.consumed:
        readers[record.message_id].add(record.consumer)
    for message_id in sorted((facts.must_deliver - facts.held) & set(messages)):
        message = messages[message_id]
        expected = history.subscriptions.get(message.topic)
        if expected is not None and _subscribers(message) != expected:
            yield Violation("fan-out", message_id, f"subscribers {sorted(_subscribers(message))}"
                                                   f"; the apps consuming {message.topic} are "
                                                   f"{sorted(expected)}")
        if not message.settled or message.state == "deleted":
            continue  # liveness (or loss) speaks about it
        unread = (_subscribers(message) & history.consumers) - readers[message_id]
        for consumer in sorted(unread):
            yield Violation("fan-out", message_id, f"subscriber {consumer} never read a record "
                                                   f"of it; it ends {_state(message)}")


def _state(message: FinalMessage) -> str:
    return message.state + (f" and dead ({message.dead_reason})" if message.dead else "")


# ---- all-acked ----------------------------------------------------------------------------


def _all_acked(message: FinalMessage, events: list[StoredEvent]) -> Iterator[Violation]:
    owed, acked = _confirmed_with(message, events), set()
    for event in events:
        if event.event == "released":
            owed.discard(str(event.detail.get("consumer")))
        if event.event not in {"acked", "released"}:
            continue
        if event.event == "acked":
            acked.add(_actor(event))
        if event.detail.get("done", True) and owed - acked:
            yield Violation("all-acked", message.message_id,
                            f"{event.event} by {_actor(event)} finished it while "
                            f"{sorted(owed - acked)} had not acked")
    if message.state == "done" and owed - set(message.acks):
        yield Violation("all-acked", message.message_id,
                        f"done, but the row holds no ack of {sorted(owed - set(message.acks))}")


# ---- stand-in -----------------------------------------------------------------------------


def _stand_in(message: FinalMessage, events: list[StoredEvent]) -> Iterator[Violation]:
    subscribers, seen = _subscribers(message), set()
    for event in events:
        actor = _actor(event)
        if event.event == "acked" and actor not in subscribers:
            yield Violation("stand-in", message.message_id, f"acked by {actor}, not a "
                                                            "subscriber (that is ack-ignored)")
        elif event.event == "acked" and actor in seen:
            yield Violation("stand-in", message.message_id, f"{actor}'s ack recorded twice")
        elif event.event == "ack-ignored" and actor in subscribers:
            yield Violation("stand-in", message.message_id, f"subscriber {actor}'s ack ignored")
        if event.event == "acked":
            seen.add(actor)
    for consumer in sorted(set(message.acks) - subscribers):
        yield Violation("stand-in", message.message_id, f"the row holds an ack of {consumer}, "
                                                        "not a subscriber")
    for consumer in sorted(set(message.acks) - seen):
        yield Violation("stand-in", message.message_id, f"the row holds an ack of {consumer} "
                                                        "with no acked event by it")


def _acks_sent(history: History, messages: Mapping[str, FinalMessage], facts: Facts
               ) -> Iterator[Violation]:
    """Each ack by one of the scenario's consumers is one it sent (over HTTP or the ack topic,
    answered or not)."""
    sent = {(op.app, op.message_id) for op in history.ops if op.kind in {"ack", "ack-topic"}}
    for message_id in sorted(messages):
        for event in facts.events.get(message_id, []):
            actor = _actor(event)
            if (event.event == "acked" and actor in history.consumers
                    and (actor, message_id) not in sent):
                yield Violation("stand-in", message_id, f"acked by {actor}, which never sent "
                                                        "an ack of it")


def _acks_answered(history: History, messages: Mapping[str, FinalMessage]
                   ) -> Iterator[Violation]:
    """A subscriber's HTTP ack answered 2xx is its own ack, kept to the end."""
    for op in history.ops:
        message = messages.get(op.message_id)
        if op.kind != "ack" or not op.ok or message is None:
            continue
        if op.app in _subscribers(message) and op.app not in message.acks:
            yield Violation("stand-in", op.message_id, f"{op.app}'s ack answered {op.status}, "
                                                       "but the row holds no ack of it")


def _awaiting(history: History, messages: Mapping[str, FinalMessage], facts: Facts
              ) -> Iterator[Violation]:
    """A record's ``rms-awaiting`` names only subscribers, and leaves one out only once its ack
    was written before the record was published."""
    for record in history.consumed:
        message = messages.get(record.message_id)
        if message is None or record.awaiting is None:
            continue
        where = f"the record of delivery {record.delivery}"
        subscribers = _confirmed_with(message, facts.events.get(record.message_id, []))
        for consumer in sorted(set(record.awaiting) - subscribers):
            yield Violation("stand-in", record.message_id, f"{where} awaits {consumer}, not a "
                                                           "subscriber")
        for consumer in sorted(_subscribers(message) - set(record.awaiting)):
            acked = message.acks.get(consumer)
            if acked is None or acked > record.timestamp + ACK_CLOCK:
                yield Violation("stand-in", record.message_id,
                                f"{where} leaves out {consumer}, which had not acked "
                                f"({'never' if acked is None else 'only later'})")


# ---- dead-per-consumer --------------------------------------------------------------------


def _dead_per_consumer(message: FinalMessage, events: list[StoredEvent]
                       ) -> Iterator[Violation]:
    subscribers, acked = _confirmed_with(message, events), set()
    stood: set[str] = set()  # the acks standing at the last dead event
    for event in events:
        if event.event == "acked":
            acked.add(_actor(event))
        elif event.event == "released":
            subscribers.discard(str(event.detail.get("consumer")))
        elif event.event == "dead" and event.detail.get("reason") == "delivery-exhausted":
            stood = acked & subscribers
            if "consumers" not in event.detail:
                continue  # a previous release's worker (rolling update): it names no one
            named = set(_names(event.detail.get("consumers")))
            if named != subscribers - acked:
                yield Violation("dead-per-consumer", message.message_id,
                                f"dead naming {sorted(named)}; still owing then: "
                                f"{sorted(subscribers - acked)}")
    if message.dead:
        for consumer in sorted(stood - set(message.acks)):
            yield Violation("dead-per-consumer", message.message_id,
                            f"dead, and {consumer}'s ack from before is gone")


def _names(value: object) -> Iterable[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _silent(history: History, messages: Mapping[str, FinalMessage], facts: Facts
            ) -> Iterator[Violation]:
    """A consumer that never acks: no confirmed message it subscribes to ends ``done`` (one
    that ends dead must name it: the dead event's check)."""
    for message_id in sorted((facts.must_deliver - facts.held) & set(messages)):
        message = messages[message_id]
        for consumer in sorted(history.silent & _subscribers(message)):
            if message.state == "done":
                yield Violation("dead-per-consumer", message_id,
                                f"{consumer} never acks, yet it ends done")
