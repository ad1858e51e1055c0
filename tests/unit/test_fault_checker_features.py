"""The invariants of transactions, per-key order, delayed messages and retention on hand-made
histories: a clean run passes, and each kind of violation is detected."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import replace

from tests.system.faults.checker import check, notes, summary
from tests.system.faults.history import (
    COMMITTED,
    ROLLED_BACK,
    CheckAnswer,
    Claim,
    Consumed,
    Failover,
    Final,
    FinalMessage,
    History,
    Op,
    StoredEvent,
)

A, POINTS = "orders", "points"
EVENTS, ORDERED = f"{A}.events", f"{A}.ordered"
T0 = 1_800_000_000.0  # the database's clock (epoch seconds) at the start
DUE = T0 + 3.0  # d1's deliver_after


def _message(message_id: str, state: str, topic: str = EVENTS, **fields: object
             ) -> FinalMessage:
    base = FinalMessage(message_id, A, topic, state, False, None, 3, 1)
    return replace(base, **fields)  # type: ignore[arg-type]


def _events(ids: itertools.count[int], message_id: str, *names: str, at: float = T0
            ) -> list[StoredEvent]:
    return [StoredEvent(message_id, name, f"app:{POINTS}" if name == "acked" else f"app:{A}",
                        {"delivery": 1} if name == "published" else {}, next(ids), at + n * 0.1)
            for n, name in enumerate(names)]


def _done(ids: itertools.count[int], message_id: str, at: float = T0) -> list[StoredEvent]:
    return _events(ids, message_id, "prepared", "confirmed", "published", "acked", at=at)


def _record(message_id: str, topic: str, offset: int, at: float, partition: int = 0
            ) -> Consumed:
    return Consumed(message_id, A, topic, 1, partition, offset, at)


def clean() -> tuple[History, Final]:
    """Transaction t1 (committed: t1-0 then t1-1 on the ordered topic, key k) and t2 (rolled
    back, cancelled); o1 and o2 on key k, o1 confirmed (answered at 5) before o2's confirm
    started (6); o3 confirmed concurrently with o2 and read before it; d1 delayed until DUE;
    old archived by retention, its events partly archived."""
    ids = itertools.count(1)
    history = History(
        ops=[Op("txn-prepare", A, "t1", 201, "pending", A, at=1, answered=1.1),
             Op("txn-confirm", A, "t1", 200, "confirmed", A, at=2, answered=2.1),
             Op("txn-prepare", A, "t2", 201, "pending", A, at=2, answered=2.2),
             Op("txn-cancel", A, "t2", 200, "cancelled", A, at=3, answered=3.1),
             Op("prepare", A, "o1", 201, "pending-send", A, at=3.5, answered=3.6),
             Op("confirm", A, "o1", None, at=4),  # unanswered, retried
             Op("confirm", A, "o1", 200, "sent", A, at=4.5, answered=5),
             Op("prepare", A, "o2", 201, "pending-send", A, at=5.5, answered=5.6),
             Op("confirm", A, "o2", 200, "sent", A, at=6, answered=6.5),
             Op("prepare", A, "o3", 201, "pending-send", A, at=5.6, answered=5.7),
             Op("confirm", A, "o3", 200, "sent", A, at=6.1, answered=6.4),
             Op("prepare", A, "d1", 201, "pending-send", A, at=7, answered=7.1),
             Op("confirm", A, "d1", 200, "sent", A, at=7.2, answered=7.3),
             Op("prepare", A, "old", 201, "pending-send", A, at=0, answered=0.1),
             Op("confirm", A, "old", 200, "sent", A, at=0.2, answered=0.3)],
        consumed=[_record("old", EVENTS, 0, T0), _record("t1-0", EVENTS, 1, T0 + 1),
                  _record("t1-1", ORDERED, 0, T0 + 1.01, partition=2),
                  _record("o1", ORDERED, 1, T0 + 2, partition=2),
                  _record("o3", ORDERED, 2, T0 + 2.1, partition=2),
                  _record("o2", ORDERED, 3, T0 + 2.2, partition=2),
                  _record("d1", EVENTS, 2, DUE + 0.05)],
        answers=[CheckAnswer("t1", A, COMMITTED, at=1.5)],
        truth={"t1": COMMITTED, "t2": ROLLED_BACK, "o1": COMMITTED, "o2": COMMITTED,
               "o3": COMMITTED, "d1": COMMITTED, "old": COMMITTED},
        consumers={POINTS},
        transactions={"t1": ("t1-0", "t1-1"), "t2": ("t2-0", "t2-1")},
    )
    for transaction in ("t1", "t2"):
        history.set_truth(transaction, history.truth[transaction])
    ordered = {"ordered": True, "key": "k"}
    old_events = _done(ids, "old", at=T0 - 10)
    final = Final(
        messages={"t1-0": _message("t1-0", "done", transaction_id="t1"),
                  "t1-1": _message("t1-1", "done", ORDERED, transaction_id="t1",
                                   confirm_seq=1, **ordered),
                  "t2-0": _message("t2-0", "deleted", delivery_count=0, transaction_id="t2"),
                  "t2-1": _message("t2-1", "deleted", ORDERED, delivery_count=0,
                                   transaction_id="t2", **ordered),
                  "o1": _message("o1", "done", ORDERED, confirm_seq=2, **ordered),
                  "o2": _message("o2", "done", ORDERED, confirm_seq=4, **ordered),
                  "o3": _message("o3", "done", ORDERED, confirm_seq=3, **ordered),
                  "d1": _message("d1", "done", deliver_after=DUE)},
        events=[*_done(ids, "t1-0"), *_done(ids, "t1-1"),
                *_events(ids, "t2-0", "prepared", "cancelled"),
                *_events(ids, "t2-1", "prepared", "cancelled"),
                *_done(ids, "o1"), *_done(ids, "o3"), *_done(ids, "o2"),
                *_events(ids, "d1", "prepared", "confirmed"),
                *_events(ids, "d1", "published", "acked", at=DUE + 0.01),
                old_events[-1]],  # the late ack event, still live
        archived=[_message("old", "done")],
        archived_events=old_events[:-1],
    )
    return history, final


def kinds(history: History, final: Final) -> dict[str, int]:
    return {kind: n for kind, n in summary(check(history, final)).items() if n}


def test_a_clean_history_of_every_feature_has_no_violation() -> None:
    history, final = clean()
    assert check(history, final) == []
    assert notes(history, final) == []


def test_a_record_of_a_rolled_back_transactions_member_is_not_atomic() -> None:
    history, final = clean()
    history.consumed.append(_record("t2-1", ORDERED, 9, T0 + 3, partition=2))
    found = check(history, final)
    assert {v.kind for v in found} >= {"atomic"}
    assert any(v.kind == "atomic" and v.message_id == "t2-1" for v in found)


def test_a_committed_transaction_with_a_member_deleted_is_not_atomic() -> None:
    history, final = clean()
    final.messages["t1-1"] = replace(final.messages["t1-1"], state="deleted")
    history.consumed = [r for r in history.consumed if r.message_id != "t1-1"]
    final.events = [e for e in final.events
                    if not (e.message_id == "t1-1" and e.event in {"published", "acked"})]
    assert "atomic" in kinds(history, final)


def test_a_committed_transaction_with_a_member_never_read_is_not_atomic() -> None:
    history, final = clean()
    history.consumed = [r for r in history.consumed if r.message_id != "t1-0"]
    found = kinds(history, final)
    assert found.get("atomic") == 1
    assert "transaction-order" in found  # t1-1 was read without t1-0 before it


def test_a_strict_prefix_of_an_atomic_publish_read_breaks_atomic_publish() -> None:
    """t1's members were published together by its confirm (delivery 1 each); the consumer
    read t1-0's record of it, but t1-1 only from a later redelivery."""
    history, final = clean()
    history.consumed = [replace(r, delivery=2) if r.message_id == "t1-1" else r
                        for r in history.consumed]
    assert kinds(history, final) == {"atomic-publish": 1}


def test_members_the_recovery_worker_published_one_by_one_are_no_atomic_publish() -> None:
    history, final = clean()
    history.consumed = [replace(r, delivery=2) if r.message_id == "t1-1" else r
                        for r in history.consumed]
    final.events = [replace(e, actor="recovery-worker:h:1:ab")
                    if e.message_id == "t1-1" and e.event == "published" else e
                    for e in final.events]
    assert kinds(history, final) == {}


def test_members_read_out_of_their_listed_order_break_transaction_order() -> None:
    history, final = clean()
    history.consumed = [replace(r, timestamp=T0 + 5) if r.message_id == "t1-0" else r
                        for r in history.consumed]
    assert kinds(history, final) == {"transaction-order": 1}


def test_a_key_read_against_its_confirm_order_breaks_key_order() -> None:
    history, final = clean()
    history.consumed = [replace(r, offset=7) if r.message_id == "o1" else r
                        for r in history.consumed]
    found = check(history, final)
    # o1's confirm was answered (5) before o2's and o3's started (6, 6.1)
    assert {(v.kind, v.message_id) for v in found} == {("key-order", "o2"), ("key-order", "o3")}


def test_confirms_in_flight_together_may_go_either_way() -> None:
    history, final = clean()
    history.consumed = [replace(r, offset={"o2": 2, "o3": 3}.get(r.message_id, r.offset))
                        if r.topic == ORDERED else r for r in history.consumed]
    assert check(history, final) == []


def test_a_check_back_commit_counts_as_the_confirms_start() -> None:
    history, final = clean()
    # o1 may have been confirmed by a check-back (3.9) before its producer's confirm (4.0)
    history.answers.append(CheckAnswer("o1", A, COMMITTED, at=3.9))
    history.consumed = [replace(r, offset={"o1": 3, "o2": 1, "o3": 4}.get(r.message_id,
                                                                          r.offset))
                        if r.topic == ORDERED else r for r in history.consumed]
    assert kinds(history, final) == {"key-order": 1}  # o1's answer (5) < o2's start (6)
    history.ops = [replace(op, answered=3.8) if (op.kind, op.message_id) == ("confirm", "o2")
                   and op.ok else op for op in history.ops]
    history.ops = [replace(op, at=3.0) if (op.kind, op.message_id) == ("confirm", "o2")
                   else op for op in history.ops]
    assert check(history, final) == []  # o2 answered (3.8) before o1's first start (3.9)
    history.ops = [replace(op, answered=3.95) if (op.kind, op.message_id) == ("confirm", "o2")
                   and op.ok else op for op in history.ops]
    assert check(history, final) == []  # in flight together (3.0-3.95 and from 3.9): either way


def test_a_key_held_behind_a_dead_message_is_reported_not_counted() -> None:
    history, final = clean()
    final.messages["o1"] = replace(final.messages["o1"], state="sent", dead=True,
                                   dead_reason="delivery-exhausted")
    final.messages["o2"] = replace(final.messages["o2"], state="sent")
    final.messages["o3"] = replace(final.messages["o3"], state="sent")
    history.consumed = [r for r in history.consumed if r.message_id not in {"o2", "o3"}]
    final.events = [e for e in final.events
                    if not (e.message_id in {"o1", "o2", "o3"}
                            and e.event in {"acked", "published"})
                    or (e.message_id == "o1" and e.event == "published")]
    final.events.append(StoredEvent("o1", "dead", "recovery-worker:x",
                                    {"reason": "delivery-exhausted"}, 999, T0 + 9))
    assert kinds(history, final) == {}
    assert notes(history, final) == ["held: o2 waits behind dead o1",
                                      "held: o3 waits behind dead o1"]


def _held_transaction(blocker_dead: bool) -> tuple[History, Final]:
    """Committed transaction t3: t3-0 ordered on key k2 behind x, then t3-1 (not ordered)
    behind t3-0 in the transaction's order; x published once, then dead or done."""
    history, final = clean()
    ids = itertools.count(500)
    history.ops += [Op("prepare", A, "x", 201, "pending-send", A, at=8, answered=8.1),
                    Op("confirm", A, "x", 200, "sent", A, at=8.2, answered=8.3),
                    Op("txn-prepare", A, "t3", 201, "pending", A, at=9, answered=9.1),
                    Op("txn-confirm", A, "t3", 200, "confirmed", A, at=9.2, answered=9.3)]
    history.transactions["t3"] = ("t3-0", "t3-1")
    history.truth["x"] = COMMITTED
    history.set_truth("t3", COMMITTED)
    history.consumed.append(_record("x", ORDERED, 0, T0 + 3, partition=1))
    ordered = {"ordered": True, "key": "k2"}
    final.messages |= {
        "x": _message("x", "sent" if blocker_dead else "done", ORDERED, confirm_seq=5,
                      dead=blocker_dead, dead_reason="delivery-exhausted" if blocker_dead
                      else None, **ordered),
        "t3-0": _message("t3-0", "sent", ORDERED, transaction_id="t3", confirm_seq=6,
                         **ordered),
        "t3-1": _message("t3-1", "sent", transaction_id="t3")}
    final.events += [*_events(ids, "x", "prepared", "confirmed", "published", at=T0 + 2.9),
                     *_events(ids, "t3-0", "prepared", "confirmed", at=T0 + 3),
                     *_events(ids, "t3-1", "prepared", "confirmed", at=T0 + 3)]
    final.events.append(StoredEvent("x", "dead" if blocker_dead else "acked",
                                    "recovery-worker:x" if blocker_dead else f"app:{POINTS}",
                                    {"reason": "delivery-exhausted"} if blocker_dead else {},
                                    next(ids), T0 + 9))
    return history, final


def test_transaction_members_held_behind_a_dead_message_are_reported_not_counted() -> None:
    history, final = _held_transaction(blocker_dead=True)
    assert kinds(history, final) == {}
    assert notes(history, final) == ["held: t3-0 waits behind dead x",
                                      "held: t3-1 waits behind dead x"]


def test_transaction_members_stuck_with_nothing_dead_ahead_break_atomicity() -> None:
    history, final = _held_transaction(blocker_dead=False)
    assert kinds(history, final).get("atomic") == 2, check(history, final)
    assert notes(history, final) == []


def test_a_publish_before_deliver_after_is_early() -> None:
    history, final = clean()
    final.events = [replace(e, at=DUE - 0.5) if (e.message_id, e.event) == ("d1", "published")
                    else e for e in final.events]
    assert kinds(history, final) == {"early": 1}


def test_a_record_before_deliver_after_is_early() -> None:
    history, final = clean()
    history.consumed = [replace(r, timestamp=DUE - 0.2) if r.message_id == "d1" else r
                        for r in history.consumed]
    assert kinds(history, final) == {"early": 1}


def test_an_unfinished_message_archived_breaks_retention() -> None:
    history, final = clean()
    final.archived = [replace(final.archived[0], state="sent")]
    found = check(history, final)
    assert any(v.kind == "retention" and "while sent" in v.detail for v in found)


def test_a_dead_message_archived_breaks_retention() -> None:
    history, final = clean()
    final.archived = [replace(final.archived[0], dead=True, dead_reason="delivery-exhausted")]
    assert "retention" in kinds(history, final)


def test_a_message_archived_twice_or_also_live_breaks_retention() -> None:
    history, final = clean()
    final.archived = [*final.archived, final.archived[0]]
    assert kinds(history, final) == {"retention": 1}
    history, final = clean()
    final.messages["old"] = final.archived[0]
    assert kinds(history, final) == {"retention": 1}


def test_an_event_archived_twice_or_also_live_breaks_retention() -> None:
    history, final = clean()
    final.archived_events = [*final.archived_events, final.archived_events[0]]
    assert kinds(history, final) == {"retention": 1}
    history, final = clean()
    final.archived_events = [*final.archived_events, final.events[-1]]
    assert kinds(history, final) == {"retention": 1}


def test_a_finished_message_removed_without_its_archive_is_lost() -> None:
    history, final = clean()
    final.archived, final.archived_events = [], []
    assert "loss" in kinds(history, final)


def test_an_archived_message_whose_events_were_not_archived_breaks_its_history() -> None:
    history, final = clean()
    final.archived_events = [e for e in final.archived_events if e.event != "prepared"]
    assert "transition" in kinds(history, final)


def test_a_claimed_row_or_an_event_gone_on_the_new_primary_is_loss() -> None:
    history, final = clean()
    before = [Claim("o1", "w:1", 1, 0), Claim("d1", "w:2", 0, 2)]
    events = [e for e in final.events if e.message_id in {"o1", "d1"}]
    history.failovers.append(Failover("pg-primary-kill", "pg0", 10.0, "pg1", 12.0, before=before,
                                      after={"o1": Claim("o1", None, 0, 0),
                                             "d1": Claim("d1", None, 0, 2)}, events=events))
    # carried over; a reservation given back (counters lower) is no loss
    assert check(history, final) == []
    lost = next(e for e in final.events if e.message_id == "o1" and e.event == "confirmed")
    final.events.remove(lost)
    found = check(history, final)
    assert ("loss", f"event {lost.id}") in {(v.kind, v.message_id) for v in found}


def test_an_event_renumbered_after_the_failover_is_no_loss() -> None:
    """The publish settle gives early acks new ids and moves the published event's time."""
    history, final = clean()
    events = [e for e in final.events if e.message_id == "o1"]
    history.failovers.append(Failover("pg-switchover", "pg0", 10.0, "pg1", 12.0,
                                      before=[Claim("o1", "w:1", 1, 0)],
                                      after={"o1": Claim("o1", None, 0, 0)}, events=events))
    top = max(e.id for e in final.events)
    final.events = [dataclasses.replace(e, id=e.id + top, at=e.at - 1.0)
                    if e.message_id == "o1" and e.event in {"published", "acked"} else e
                    for e in final.events]
    final.events.sort(key=lambda e: e.id)
    assert check(history, final) == []


def test_a_claimed_row_missing_on_the_new_primary_is_loss() -> None:
    history, final = clean()
    history.failovers.append(Failover("pg-switchover", "pg0", 10.0, "pg1", 12.0,
                                      before=[Claim("gone", "w:1", 1, 0)]))
    assert [(v.kind, v.message_id) for v in check(history, final)] == [("loss", "gone")]
