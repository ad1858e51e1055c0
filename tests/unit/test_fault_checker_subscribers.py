"""The fault suite's invariants of messages with several consumers, on hand-made histories: a
clean run with two acking consumers and one that never acks passes, and each invariant fires
when its promise is broken (a checker that cannot fail proves nothing)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tests.system.faults.checker import check, summary
from tests.system.faults.history import (
    COMMITTED,
    Consumed,
    Final,
    FinalMessage,
    History,
    Op,
    StoredEvent,
)

A, POINTS, INVOICES, AUDIT = "orders", "points", "invoices", "audit"
EVENTS, AUDITED = f"{A}.events", f"{A}.audit"
T0 = 1_700_000_000.0


def _message(message_id: str, topic: str, state: str, subscribers: tuple[str, ...] | None,
             acks: dict[str, float], **fields: Any) -> FinalMessage:
    base = FinalMessage(message_id, A, topic, state, False, None, 3, 2,
                        subscribers=subscribers, acks=acks)
    return replace(base, **fields)


def _event(message_id: str, name: str, actor: str = f"app:{A}", **detail: Any) -> StoredEvent:
    return StoredEvent(message_id, name, actor, detail)


def _acked(message_id: str, consumer: str, done: bool) -> StoredEvent:
    return _event(message_id, "acked", f"app:{consumer}", via="http", done=done)


def _read(message_id: str, topic: str, delivery: int, consumer: str, at: float,
          awaiting: tuple[str, ...] | None) -> Consumed:
    return Consumed(message_id, A, topic, delivery, timestamp=at, consumer=consumer,
                    awaiting=awaiting)


def _confirmed(message_id: str) -> list[Op]:
    return [Op("prepare", A, message_id, 201, "pending-send", A),
            Op("confirm", A, message_id, 200, "sent", A)]


def clean() -> tuple[History, Final]:
    """m1 on a topic read by points and invoices: points acks delivery 1, invoices crashes
    before acking and acks delivery 2 (whose record awaits invoices only): done. m2 on a topic
    the audit app reads too, which never acks: dead naming audit, the others' acks kept. m3
    follows the single-ack rule."""
    both, three = (INVOICES, POINTS), (AUDIT, INVOICES, POINTS)
    history = History(
        ops=[*_confirmed("m1"), *_confirmed("m2"), *_confirmed("m3"),
             Op("ack", POINTS, "m1", 200, "sent", A), Op("ack", INVOICES, "m1", 200, "done", A),
             Op("ack", POINTS, "m2", 200, "sent", A), Op("ack-topic", INVOICES, "m2", None),
             Op("ack", POINTS, "m3", 200, "done", A)],
        consumed=[_read("m1", EVENTS, 1, c, T0 + 1, both) for c in both]
        + [_read("m1", EVENTS, 2, c, T0 + 3, (INVOICES,)) for c in both]
        + [_read("m2", AUDITED, d, c, T0 + d, three if d == 1 else (AUDIT,))
           for d in (1, 2, 3) for c in three]
        + [_read("m3", EVENTS, 1, POINTS, T0 + 1, None)],
        truth={"m1": COMMITTED, "m2": COMMITTED, "m3": COMMITTED},
        consumers={POINTS, INVOICES, AUDIT},
        subscriptions={EVENTS: frozenset(both), AUDITED: frozenset(three)},
        silent={AUDIT},
    )
    final = Final(
        messages={
            "m1": _message("m1", EVENTS, "done", both, {POINTS: T0 + 2, INVOICES: T0 + 4}),
            "m2": _message("m2", AUDITED, "sent", three, {POINTS: T0 + 1.5, INVOICES: T0 + 1.6},
                           dead=True, dead_reason="delivery-exhausted", delivery_count=3),
            "m3": _message("m3", EVENTS, "done", None, {POINTS: T0 + 2}, delivery_count=1)},
        events=[_event("m1", "prepared"), _event("m1", "confirmed"),
                _event("m1", "published", "rms", delivery=1), _acked("m1", POINTS, False),
                _event("m1", "published", "rms", delivery=2), _acked("m1", INVOICES, True),
                _event("m2", "prepared"), _event("m2", "confirmed"),
                _event("m2", "published", "rms", delivery=1), _acked("m2", POINTS, False),
                _acked("m2", INVOICES, False), _event("m2", "published", "rms", delivery=2),
                _event("m2", "published", "rms", delivery=3),
                _event("m2", "dead", "rms", reason="delivery-exhausted", consumers=[AUDIT]),
                _event("m3", "prepared"), _event("m3", "confirmed"),
                _event("m3", "published", "rms", delivery=1), _acked("m3", POINTS, True)],
    )
    return history, final


def kinds(history: History, final: Final) -> dict[str, int]:
    return {kind: n for kind, n in summary(check(history, final)).items() if n}


def details(history: History, final: Final, kind: str) -> list[str]:
    return [v.detail for v in check(history, final) if v.kind == kind]


def _without(final: Final, message_id: str, name: str, actor: str) -> list[StoredEvent]:
    return [e for e in final.events
            if (e.message_id, e.event, e.actor) != (message_id, name, f"app:{actor}")]


def test_two_consumers_and_one_that_never_acks_keep_every_invariant() -> None:
    assert check(*clean()) == []


def test_stored_subscribers_missing_a_consuming_app_is_fan_out() -> None:
    history, final = clean()
    final.messages["m1"] = replace(final.messages["m1"], subscribers=(POINTS,))
    final.events = _without(final, "m1", "acked", INVOICES)
    found = details(history, final, "fan-out")
    assert found == ["subscribers ['points']; the apps consuming orders.events are "
                     "['invoices', 'points']"]


def test_a_subscriber_that_never_read_the_message_is_fan_out() -> None:
    history, final = clean()
    history.consumed = [r for r in history.consumed
                        if (r.message_id, r.consumer) != ("m2", AUDIT)]
    assert kinds(history, final) == {"fan-out": 1}
    assert details(history, final, "fan-out") == [
        "subscriber audit never read a record of it; it ends sent and dead "
        "(delivery-exhausted)"]


def test_done_at_the_first_of_two_acks_is_all_acked() -> None:
    history, final = clean()
    final.events = [_acked("m1", POINTS, True) if e.event == "acked" and e.message_id == "m1"
                    and e.actor == f"app:{POINTS}" else e for e in final.events]
    assert "acked by points finished it while ['invoices'] had not acked" in details(
        history, final, "all-acked")


def test_done_without_every_ack_in_the_row_is_all_acked() -> None:
    history, final = clean()
    final.messages["m1"] = replace(final.messages["m1"], acks={POINTS: T0 + 2})
    assert "done, but the row holds no ack of ['invoices']" in details(history, final,
                                                                        "all-acked")


def test_an_ack_by_an_app_that_is_not_a_subscriber_is_stand_in() -> None:
    history, final = clean()
    history.ops.append(Op("ack", AUDIT, "m1", 200, "sent", A))
    final.events.insert(4, _acked("m1", AUDIT, False))
    assert details(history, final, "stand-in") == [
        "acked by audit, not a subscriber (that is ack-ignored)"]


def test_an_ack_no_consumer_sent_is_stand_in() -> None:
    history, final = clean()
    history.ops = [op for op in history.ops if (op.app, op.message_id) != (INVOICES, "m2")]
    assert details(history, final, "stand-in") == [
        "acked by invoices, which never sent an ack of it"]


def test_a_subscribers_ack_recorded_as_ignored_is_stand_in() -> None:
    history, final = clean()
    final.events.insert(4, _event("m1", "ack-ignored", f"app:{INVOICES}", via="http",
                                  reason="not-a-subscriber"))
    assert details(history, final, "stand-in") == ["subscriber invoices's ack ignored"]


def test_an_ack_counted_twice_is_stand_in() -> None:
    history, final = clean()
    final.events.insert(4, _acked("m1", POINTS, False))
    assert details(history, final, "stand-in") == ["points's ack recorded twice"]


def test_an_answered_ack_missing_from_the_row_is_stand_in() -> None:
    history, final = clean()
    final.messages["m2"] = replace(final.messages["m2"], acks={INVOICES: T0 + 1.6})
    found = details(history, final, "stand-in")
    assert "points's ack answered 200, but the row holds no ack of it" in found


def test_a_row_ack_without_its_event_is_stand_in() -> None:
    history, final = clean()
    final.events = _without(final, "m2", "acked", INVOICES)
    assert details(history, final, "stand-in") == [
        "the row holds an ack of invoices with no acked event by it"]


def test_a_record_that_leaves_out_a_consumer_before_its_ack_is_stand_in() -> None:
    history, final = clean()
    history.consumed.append(_read("m1", EVENTS, 2, POINTS, T0 + 1.5, (INVOICES,)))
    assert details(history, final, "stand-in") == [
        "the record of delivery 2 leaves out points, which had not acked (only later)"]


def test_a_record_awaiting_an_app_that_is_not_a_subscriber_is_stand_in() -> None:
    history, final = clean()
    history.consumed.append(_read("m1", EVENTS, 2, POINTS, T0 + 3, (AUDIT, INVOICES)))
    assert details(history, final, "stand-in") == [
        "the record of delivery 2 awaits audit, not a subscriber"]


def test_dead_naming_a_consumer_that_had_acked_is_dead_per_consumer() -> None:
    history, final = clean()
    final.events[-5] = _event("m2", "dead", "rms", reason="delivery-exhausted",
                              consumers=[AUDIT, POINTS])
    assert details(history, final, "dead-per-consumer") == [
        "dead naming ['audit', 'points']; still owing then: ['audit']"]


def test_dead_that_drops_the_others_acks_is_dead_per_consumer() -> None:
    history, final = clean()
    final.messages["m2"] = replace(final.messages["m2"], acks={INVOICES: T0 + 1.6})
    assert details(history, final, "dead-per-consumer") == [
        "dead, and points's ack from before is gone"]


def test_a_message_done_although_a_consumer_never_acked_is_dead_per_consumer() -> None:
    history, final = clean()
    message = final.messages["m2"]
    final.messages["m2"] = replace(message, dead=False, dead_reason=None, state="done",
                                   acks=message.acks | {AUDIT: T0 + 4})
    final.events = [e for e in final.events if e.event != "dead"]
    final.events += [_acked("m2", AUDIT, True)]
    found = check(history, final)
    assert [(v.kind, v.detail) for v in found] == [
        ("stand-in", "acked by audit, which never sent an ack of it"),
        ("dead-per-consumer", "audit never acks, yet it ends done")]


def _release_invoices(final: Final, done: bool) -> None:
    """invoices (owing m1) deleted after points acked: released, m1 done with no ack of it."""
    final.messages["m1"] = replace(final.messages["m1"], subscribers=(POINTS,),
                                   acks={POINTS: T0 + 2})
    final.events = [_event("m1", "released", "rms", consumer=INVOICES, reason="app-deleted",
                           done=done) if (e.message_id, e.event, e.actor) == (
                               "m1", "acked", f"app:{INVOICES}") else e for e in final.events]


def test_a_consumer_released_from_what_it_owes_finishes_the_message() -> None:
    history, final = clean()
    history.subscriptions[EVENTS] = frozenset({POINTS})  # as the apps are at the end
    history.ops = [op for op in history.ops if (op.app, op.message_id) != (INVOICES, "m1")]
    _release_invoices(final, done=True)
    assert check(history, final) == []


def test_a_release_that_finishes_a_message_another_still_owes_is_all_acked() -> None:
    history, final = clean()
    history.subscriptions[EVENTS] = frozenset({POINTS})
    history.ops = [op for op in history.ops if (op.app, op.message_id) != (INVOICES, "m1")]
    _release_invoices(final, done=True)
    final.events = _without(final, "m1", "acked", POINTS)
    final.messages["m1"] = replace(final.messages["m1"], acks={})
    history.ops = [op for op in history.ops if (op.app, op.message_id) != (POINTS, "m1")]
    assert details(history, final, "all-acked") == [
        "done, but the row holds no ack of ['points']",
        "released by rms finished it while ['points'] had not acked"]


def test_dead_naming_no_one_while_a_consumer_owes_is_one_violation() -> None:
    """Reported once, at the event."""
    history, final = clean()
    final.events[-5] = _event("m2", "dead", "rms", reason="delivery-exhausted", consumers=[])
    assert details(history, final, "dead-per-consumer") == [
        "dead naming []; still owing then: ['audit']"]


def test_a_previous_releases_dead_event_names_no_consumer_and_is_not_held_to_it() -> None:
    """A worker of the previous release (rolling update) writes no ``consumers`` at all: who
    owes the message is in its row, and the others' acks must still stand."""
    history, final = clean()
    final.events[-5] = _event("m2", "dead", "rms", reason="delivery-exhausted")
    assert details(history, final, "dead-per-consumer") == []


def test_the_single_ack_rule_is_left_to_the_single_message_invariants() -> None:
    history, final = clean()
    history.ops.append(Op("ack", INVOICES, "m3", 200, "done", A))
    final.messages["m3"] = replace(final.messages["m3"], state="sent")
    assert {v.kind for v in check(history, final)} == {"loss", "transition", "liveness"}
