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
* **isolation**: an app never sees or changes another app's message;
* **atomic**: no record of a member of a transaction whose producer did not commit; every member
  of a committed one delivered or dead with its reason, never some members deleted and others
  not;
* **atomic-publish**: the members a confirm published in one Kafka transaction are read all
  or none (``atomic_publish.py``);
* **transaction-order**: members' first deliveries keep their listed order (record timestamps:
  each member is handed to the broker once the one before was accepted);
* **key-order**: per ordering key ``(app, topic, key)`` first deliveries come in confirm order
  (section 10 of the design): a message whose confirm was answered before another's confirm
  (or committed check-back) started is read first. A key held behind a dead message is
  reported (:func:`notes`), not a violation;
* **early**: no publish (event, on the database clock) and no record before ``deliver_after``;
* **retention**: only finished (``done`` / ``deleted``), not dead messages are archived, and
  archive plus live tables hold each message and each event exactly once.

A message read by several consumer apps has four invariants more (``subscribers.py``):
**fan-out**, **all-acked**, **stand-in** and **dead-per-consumer**.

A transaction's requests (``txn-prepare``, ``txn-confirm``, ``txn-cancel``) and check-back
answers count for each of its members in the single-message invariants.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping

from tests.system.faults.atomic_publish import KIND as ATOMIC_PUBLISH
from tests.system.faults.atomic_publish import check_atomic_publish
from tests.system.faults.history import (
    COMMITTED,
    CheckAnswer,
    Consumed,
    Final,
    FinalMessage,
    History,
    Op,
    StoredEvent,
    Violation,
)
from tests.system.faults.subscribers import KINDS as SUBSCRIBER_KINDS
from tests.system.faults.subscribers import Facts, check_subscribers

KINDS = ("loss", "phantom", "duplicates", "transition", "liveness", "isolation", "atomic",
         ATOMIC_PUBLISH, "transaction-order", "key-order", "early", "retention", *SUBSCRIBER_KINDS)
FINISHED = frozenset({"done", "deleted"})
RECORD_CLOCK = 0.001  # record timestamps are whole milliseconds

# event -> (required state before, state after)
STATE_EVENTS: dict[str, tuple[str | None, str]] = {
    "prepared": (None, "pending-send"),
    "sent": (None, "sent"),
    "confirmed": ("pending-send", "sent"),
    "cancelled": ("pending-send", "deleted"),
    "acked": ("sent", "done"),
    "released": ("sent", "done"),  # a consumer released: done when no one else owes it
}
DEAD_REASON_FOR = {"pending-send": "check-exhausted", "sent": "delivery-exhausted"}
# a 2xx answer to these ops promises these states at the end (an ack: of a message with the
# single-ack rule; a subscriber's ack promises its own ack, ``subscribers.py``)
SURVIVES = {"confirm": {"sent", "done"}, "cancel": {"deleted"}, "ack": {"done"}}


def check(history: History, final: Final) -> list[Violation]:
    """Every violation found (empty: the run kept every invariant)."""
    retention = list(_retention(final))
    final = final.merged()
    history = per_member(history)
    events = _by_message(final.events)
    held = set(held_keys(final, history.transactions))
    found = [
        *_loss(history, final, held),
        *_phantom(history, final, events),
        *_duplicates(history, final, events),
        *_transitions(history, final, events),
        *_liveness(final, held),
        *_isolation(history, final),
        *_atomic(history, final, held),
        *check_atomic_publish(history, final),
        *_transaction_order(history, final),
        *_key_order(history, final),
        *_early(history, final),
        *retention,
        *check_subscribers(history, final, Facts(_must_deliver(history, final), held, events)),
    ]
    return sorted(found, key=lambda v: (KINDS.index(v.kind), v.message_id, v.detail))


def notes(history: History, final: Final) -> list[str]:
    """What the run shows that is not a violation: keys held behind a dead message, order
    checks skipped because the broker lost its log."""
    held = held_keys(final.merged(), history.transactions)
    found = [f"held: {waiting} waits behind dead {blocker}"
             for waiting, blocker in sorted(held.items())]
    if history.log_lost:
        found.append("order not checked: the broker lost its log (and the records in it)")
    return found


def per_member(history: History) -> History:
    """The history with each transaction request and check-back answer repeated for each of
    the transaction's members, as a message request and answer of the member."""
    ops = [*history.ops]
    answers = []
    for op in history.ops:
        if op.kind.startswith("txn-"):
            ops += [dataclasses.replace(op, kind=op.kind.removeprefix("txn-"), message_id=m)
                    for m in history.transactions.get(op.message_id, ())]
    for answer in history.answers:  # a transaction's answer stands for its members'
        members = history.transactions.get(answer.message_id, (answer.message_id,))
        answers += [CheckAnswer(m, answer.app, answer.status, answer.at) for m in members]
    return dataclasses.replace(history, ops=ops, answers=answers)


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


def _loss(history: History, final: Final, held: set[str]) -> Iterator[Violation]:
    """``held``: ordered messages waiting behind a dead one of their key (reported apart)."""
    yield from _answers_survive(history.ops, final)
    yield from _claims_survive(history, final)
    consumed = {record.message_id for record in history.consumed}
    for message_id in sorted(_must_deliver(history, final) - held):
        yield from _delivered(message_id, final.messages.get(message_id), consumed)


def _claims_survive(history: History, final: Final) -> Iterator[Violation]:
    """What was committed about the claimed messages before a failover is on the new
    primary: each row is there right after the promotion (or ended finished and archived),
    and each of their events then is in the final tables or the archive. (A claim's counters
    may legitimately go back: an unpublished reservation is given back, its event withdrawn.)"""
    stored = Counter(_identity(e) for e in final.events)
    for failover in history.failovers:
        for claim in failover.before:
            if claim.message_id not in failover.after and claim.message_id not in final.messages:
                yield Violation("loss", claim.message_id, f"claimed before {failover.kind} of "
                                                          f"{failover.old}, gone after it")
        for event in failover.events:
            if stored[_identity(event)] > 0:
                stored[_identity(event)] -= 1
            else:
                yield Violation("loss", f"event {event.id}",
                                f"{event.event} of {event.message_id} committed before "
                                f"{failover.kind} of {failover.old}, gone after it")


# a delivery's ``publishing`` event and what its outcome completes it into, in place
PUBLISH_EVENTS = frozenset({"publishing", "published", "publish-failed", "withdrawn"})


def _identity(event: StoredEvent) -> tuple[str, str, str, str]:
    """An event as a later read still knows it: its id and time are not kept. A delivery's
    ``publishing`` event is completed in place (its name, detail and actor change), so it is
    known by its message and delivery number."""
    if event.event in PUBLISH_EVENTS:
        return event.message_id, "publishing", "", str(event.detail.get("delivery"))
    return event.message_id, event.event, event.actor, json.dumps(event.detail, sort_keys=True)


def _answers_survive(ops: Iterable[Op], final: Final) -> Iterator[Violation]:
    for op in ops:
        if not op.ok or op.kind not in {"prepare", *SURVIVES}:
            continue
        message = final.messages.get(op.message_id)
        if message is None:
            yield Violation("loss", op.message_id, f"{op.kind} answered {op.status} but the "
                                                   "message is not stored")
        elif op.kind == "ack" and message.subscribers is not None:
            continue  # one subscriber's ack: kept as its own (subscribers.py)
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
        source, target = _move(event)
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


def _move(event: StoredEvent) -> tuple[str | None, str]:
    """An ack or a release that leaves another subscriber owing keeps the message ``sent`` (an
    ack under the single-ack rule always finishes it)."""
    finished = event.detail.get("done", event.event == "acked")
    if event.event in {"acked", "released"} and finished is not True:
        return "sent", "sent"
    return STATE_EVENTS[event.event]


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


def _liveness(final: Final, held: set[str]) -> Iterator[Violation]:
    for message_id, message in sorted(final.messages.items()):
        if message.settled or message_id in held:
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
    allowed = {message.app} | (consumers if event.event in {"acked", "ack-ignored"} else set())
    if actor not in allowed:
        yield Violation("isolation", event.message_id,
                        f"{event.event} by app {actor} on {message.app}'s message")


# ---- transactions -------------------------------------------------------------------------


def _atomic(history: History, final: Final, held: set[str]) -> Iterator[Violation]:
    """``held``: members waiting behind a dead message (reported apart, as the contract
    holds them until an operator acts)."""
    seen = {r.message_id for r in history.consumed} | {
        e.message_id for e in final.events if e.event == "published"}
    for transaction, members in sorted(history.transactions.items()):
        truth = history.truth.get(transaction)
        if truth != COMMITTED:
            for member in members:
                if member in seen:
                    yield Violation("atomic", member, f"published or read, but transaction "
                                                      f"{transaction} is {truth}")
            continue
        yield from _all_or_none(transaction, members, final, history, held)


def _all_or_none(transaction: str, members: tuple[str, ...], final: Final, history: History,
                 held: set[str]) -> Iterator[Violation]:
    stored = [final.messages[m] for m in members if m in final.messages]
    if not stored:
        return  # never prepared (a prepare answered 2xx that is gone is a loss)
    read = {r.message_id for r in history.consumed}
    for member in members:
        message = final.messages.get(member)
        if message is None:
            yield Violation("atomic", member, f"transaction {transaction} committed; this "
                                              "member is not stored, others are")
        elif (message.dead and message.dead_reason) or member in held:
            continue
        elif message.state != "done" or member not in read:
            how = "never read" if message.state == "done" else f"ends {message.state}"
            yield Violation("atomic", member, f"transaction {transaction} committed; this "
                                              f"member {how}")


def _first_records(consumed: Iterable[Consumed]) -> dict[str, Consumed]:
    """Per message, its earliest record in the topic: its first delivery. Not necessarily the
    lowest delivery number: a worker frozen past its lease may publish its delivery 1 after
    the worker that took the message over published delivery 2."""
    first: dict[str, Consumed] = {}
    for record in consumed:
        known = first.get(record.message_id)
        if known is None or _precedes(record, known):
            first[record.message_id] = record
    return first


def _transaction_order(history: History, final: Final) -> Iterator[Violation]:
    if history.log_lost:
        return
    first = _first_records(history.consumed)
    for transaction, members in sorted(history.transactions.items()):
        if history.truth.get(transaction) != COMMITTED:
            continue
        for earlier, later in itertools.pairwise(members):
            yield from _before("transaction-order", earlier, later, first,
                               f"of transaction {transaction}")


def _before(kind: str, earlier: str, later: str, first: dict[str, Consumed], why: str
            ) -> Iterator[Violation]:
    """``earlier``'s first delivery must not come after ``later``'s."""
    if later not in first:
        return
    if earlier not in first:
        yield Violation(kind, later, f"read, but {earlier} (before it {why}) never was")
    elif _precedes(first[later], first[earlier]):
        yield Violation(kind, later, f"first delivered ({_where(first[later])}) before "
                                     f"{earlier} ({_where(first[earlier])}), before it {why}")


def _where(record: Consumed) -> str:
    return (f"{record.topic}/{record.partition}@{record.offset} delivery {record.delivery}, "
            f"{record.timestamp:.3f}")


def _precedes(a: Consumed, b: Consumed) -> bool:
    """``a`` strictly before ``b``: by offset within one partition, else by timestamp."""
    if (a.topic, a.partition) == (b.topic, b.partition):
        return a.offset < b.offset
    return a.timestamp + RECORD_CLOCK <= b.timestamp


# ---- per-key order ------------------------------------------------------------------------


def _key_order(history: History, final: Final) -> Iterator[Violation]:
    if history.log_lost:
        return
    first = _first_records(history.consumed)
    started, answered = _confirm_times(history)
    for key, ids in sorted(_ordered_keys(final).items()):
        for a in ids:
            for b in ids:
                if a != b and answered.get(a, math.inf) < started.get(b, -math.inf):
                    yield from _before("key-order", a, b, first,
                                       f"on key {key}: its confirm was answered before this "
                                       "one's started")


def _ordered_keys(final: Final) -> dict[tuple[str, str, str], list[str]]:
    keys: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for message in final.messages.values():
        if message.ordered and message.key is not None:
            keys[(message.app, message.topic, message.key)].append(message.message_id)
    return {k: sorted(ids) for k, ids in keys.items()}


def _confirm_times(history: History) -> tuple[dict[str, float], dict[str, float]]:
    """Per message, when its confirm may have happened first (its first confirm request
    started, or a check-back answered committed) and when one was answered 2xx at the
    latest. ``history`` has the transactions' requests per member."""
    started: dict[str, float] = {}
    answered: dict[str, float] = {}
    for op in history.ops:
        if op.kind != "confirm":
            continue
        started[op.message_id] = min(started.get(op.message_id, math.inf), op.at)
        if op.ok and op.answered is not None:
            answered[op.message_id] = min(answered.get(op.message_id, math.inf), op.answered)
    for answer in history.answers:
        if answer.status == COMMITTED:
            started[answer.message_id] = min(started.get(answer.message_id, math.inf),
                                             answer.at)
    return started, answered


def held_keys(final: Final, transactions: Mapping[str, tuple[str, ...]] | None = None
              ) -> dict[str, str]:
    """Messages still waiting (``sent``, not dead) behind a dead one, as the contract holds
    them: an ordered message behind a dead or waiting message of its key confirmed before it;
    a transaction's member behind a dead or waiting earlier member never published. Message
    id -> the dead message at the head of the line."""
    published = {e.message_id for e in final.events if e.event == "published"}
    held: dict[str, str] = {}
    while True:
        found = [*_behind_in_key(final, held),
                 *_behind_in_transaction(final, transactions or {}, held, published)]
        new = {waiting: head for waiting, head in found if waiting not in held}
        if not new:
            return held
        held |= new


def _waits(message: FinalMessage) -> bool:
    return message.state == "sent" and not message.dead


def _behind_in_key(final: Final, held: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    by_key: dict[tuple[str, str, str], list[FinalMessage]] = defaultdict(list)
    for message in final.messages.values():
        if message.ordered and message.key is not None and message.confirm_seq is not None:
            by_key[(message.app, message.topic, message.key)].append(message)
    for queue in by_key.values():
        head: str | None = None
        for message in sorted(queue, key=lambda m: m.confirm_seq or 0):
            if head is not None and _waits(message):
                yield message.message_id, head
            elif head is None and message.state == "sent" and (
                    message.dead or message.message_id in held):
                head = held.get(message.message_id, message.message_id)


def _behind_in_transaction(final: Final, transactions: Mapping[str, tuple[str, ...]],
                           held: Mapping[str, str], published: set[str]
                           ) -> Iterator[tuple[str, str]]:
    for members in transactions.values():
        head: str | None = None
        for member in members:
            message = final.messages.get(member)
            if message is None or member in published:
                continue
            if head is not None and _waits(message):
                yield member, head
            elif head is None and message.state == "sent" and (message.dead or member in held):
                head = held.get(member, member)


# ---- delayed messages ---------------------------------------------------------------------


def _early(history: History, final: Final) -> Iterator[Violation]:
    for event in final.events:
        message = final.messages.get(event.message_id)
        due = None if message is None else message.deliver_after
        if event.event == "published" and due is not None and event.at < due:
            yield Violation("early", event.message_id, f"published {due - event.at:.3f}s "
                                                       "before its deliver_after")
    for record in history.consumed:
        message = final.messages.get(record.message_id)
        due = None if message is None else message.deliver_after
        if due is not None and record.timestamp + RECORD_CLOCK <= due:
            yield Violation("early", record.message_id, f"record (delivery {record.delivery}) "
                                                        f"{due - record.timestamp:.3f}s before "
                                                        "its deliver_after")


# ---- retention ----------------------------------------------------------------------------


def _retention(final: Final) -> Iterator[Violation]:
    live = set(final.messages)
    seen: set[str] = set()
    for message in final.archived:
        if message.state not in FINISHED or message.dead:
            yield Violation("retention", message.message_id, f"archived (removed) while "
                                                             f"{message.state}"
                                                             f"{' and dead' if message.dead else ''}")
        if message.message_id in seen or message.message_id in live:
            where = "twice in the archive" if message.message_id in seen else "also live"
            yield Violation("retention", message.message_id, f"archived {where}")
        seen.add(message.message_id)
    events = {e.id for e in final.events}
    archived_events: set[int] = set()
    for event in final.archived_events:
        if event.id in archived_events or event.id in events:
            where = "twice in the archive" if event.id in archived_events else "also live"
            yield Violation("retention", event.message_id, f"event {event.id} ({event.event}) "
                                                           f"archived {where}")
        archived_events.add(event.id)
