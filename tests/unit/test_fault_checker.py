"""The history checker on hand-made histories: a clean run passes, and each kind of violation
is detected (a checker that cannot fail proves nothing)."""

from __future__ import annotations

from dataclasses import replace

from tests.system.faults.checker import check, summary
from tests.system.faults.history import (
    COMMITTED,
    OPEN,
    ROLLED_BACK,
    CheckAnswer,
    Consumed,
    Final,
    FinalMessage,
    History,
    Op,
    StoredEvent,
)

A, B, POINTS = "orders", "billing", "points"


def _message(message_id: str, state: str, app: str = A, **fields: object) -> FinalMessage:
    base = FinalMessage(message_id, app, f"{app}.t", state, False, None, 3, 1)
    return replace(base, **fields)  # type: ignore[arg-type]


def _events(message_id: str, *names: str, actor: str = f"app:{A}") -> list[StoredEvent]:
    return [StoredEvent(message_id, name, POINTS_ACTOR if name == "acked" else actor,
                        {"delivery": 1} if name == "published" else {}) for name in names]


POINTS_ACTOR = f"app:{POINTS}"


def clean() -> tuple[History, Final]:
    """Three messages: confirmed and acked (m1), cancelled (m2), repaired by check-back (m3)."""
    history = History(
        ops=[Op("prepare", A, "m1", 201, "pending-send", A), Op("confirm", A, "m1", 200, "sent", A),
             Op("ack", POINTS, "m1", 200, "done", A), Op("prepare", A, "m2", 201, "pending-send", A),
             Op("cancel", A, "m2", 200, "deleted", A), Op("prepare", A, "m3", None),
             Op("probe", B, "m1", 404), Op("ack", POINTS, "m3", 200, "done", A)],
        consumed=[Consumed("m1", A, f"{A}.t", 1), Consumed("m3", A, f"{A}.t", 1),
                  Consumed("m3", A, f"{A}.t", 2)],
        answers=[CheckAnswer("m3", A, OPEN), CheckAnswer("m3", A, COMMITTED)],
        truth={"m1": COMMITTED, "m2": ROLLED_BACK, "m3": COMMITTED},
        consumers={POINTS},
    )
    final = Final(
        messages={"m1": _message("m1", "done"), "m2": _message("m2", "deleted", delivery_count=0),
                  "m3": _message("m3", "done", delivery_count=2)},
        events=[*_events("m1", "prepared", "confirmed", "published", "acked"),
                *_events("m2", "prepared", "cancelled"),
                *_events("m3", "prepared", "checked", "checked", "confirmed", "published"),
                StoredEvent("m3", "published", "recovery-worker:x", {"delivery": 2}),
                *_events("m3", "acked")],
    )
    return history, final


def kinds(history: History, final: Final) -> dict[str, int]:
    return {kind: n for kind, n in summary(check(history, final)).items() if n}


def test_a_clean_history_has_no_violation() -> None:
    assert check(*clean()) == []


def test_a_confirm_answered_2xx_but_never_done_is_loss() -> None:
    history, final = clean()
    final.messages["m1"] = _message("m1", "sent")
    final.events = [e for e in final.events if not (e.message_id == "m1" and e.event == "acked")]
    history.ops = [op for op in history.ops if op.kind != "ack" or op.message_id != "m1"]
    found = check(history, final)
    assert {v.kind for v in found} == {"loss", "liveness"}
    assert any("confirmed but ends sent" in v.detail for v in found)


def test_a_2xx_prepare_whose_row_vanished_is_loss() -> None:
    history, final = clean()
    del final.messages["m2"]
    final.events = [e for e in final.events if e.message_id != "m2"]
    assert kinds(history, final) == {"loss": 2}  # the prepare and the cancel


def test_a_committed_check_back_never_delivered_is_loss() -> None:
    history, final = clean()
    history.ops.append(Op("prepare", A, "m4", 201, "pending-send", A))
    history.answers.append(CheckAnswer("m4", A, COMMITTED))
    history.truth["m4"] = COMMITTED
    final.messages["m4"] = _message("m4", "deleted", delivery_count=0)
    final.events += _events("m4", "prepared", "cancelled")
    assert kinds(history, final) == {"loss": 1}


def test_a_committed_transaction_whose_message_was_cancelled_is_loss() -> None:
    history, final = clean()
    history.ops.append(Op("prepare", A, "m7", 201, "pending-send", A))
    history.truth["m7"] = COMMITTED  # the producer crashed before confirming
    final.messages["m7"] = _message("m7", "deleted", delivery_count=0)
    final.events += _events("m7", "prepared", "cancelled")
    found = check(history, final)
    assert [(v.kind, v.detail) for v in found] == [
        ("loss", "confirmed but ends deleted, not done and not dead")]


def test_done_without_any_record_read_is_loss() -> None:
    history, final = clean()
    history.consumed = [r for r in history.consumed if r.message_id != "m1"]
    assert [v.detail for v in check(history, final)] == [
        "done but no consumer ever read a record of it"]


def test_dead_with_a_reason_is_not_loss() -> None:
    history, final = clean()
    final.messages["m1"] = _message("m1", "sent", dead=True, dead_reason="delivery-exhausted")
    final.events = [e for e in final.events if not (e.message_id == "m1" and e.event == "acked")]
    final.events.append(StoredEvent("m1", "dead", "recovery", {"reason": "delivery-exhausted"}))
    history.ops = [op for op in history.ops if op.kind != "ack" or op.message_id != "m1"]
    assert check(history, final) == []


def test_a_record_of_a_rolled_back_transaction_is_a_phantom() -> None:
    history, final = clean()
    history.consumed.append(Consumed("m2", A, f"{A}.t", 1))
    found = check(history, final)
    assert {v.kind for v in found} == {"phantom"}
    assert any("rolled_back" in v.detail for v in found)
    assert any("cancelled" in v.detail for v in found)


def test_a_published_event_of_a_never_confirmed_message_is_a_phantom() -> None:
    history, final = clean()
    history.truth["m5"] = OPEN
    final.messages["m5"] = _message("m5", "pending-send", dead=True,
                                    dead_reason="check-exhausted")
    final.events += [*_events("m5", "prepared", "published"),
                     StoredEvent("m5", "dead", "w", {"reason": "check-exhausted"})]
    assert kinds(history, final) == {"phantom": 2}


def test_more_publishes_than_max_deliveries_are_duplicates() -> None:
    history, final = clean()
    final.events += [StoredEvent("m3", "published", "w", {"delivery": n}) for n in (3, 4)]
    assert kinds(history, final) == {"duplicates": 1}


def test_more_delivery_numbers_consumed_than_allowed_are_duplicates() -> None:
    history, final = clean()
    history.consumed.append(Consumed("m1", A, f"{A}.t", 4))
    assert kinds(history, final) == {"duplicates": 1}


def test_the_same_delivery_read_twice_is_not_a_duplicate_publish() -> None:
    history, final = clean()
    history.consumed += [Consumed("m1", A, f"{A}.t", 1)] * 5
    assert check(history, final) == []


def test_an_event_from_a_final_state_is_an_illegal_transition() -> None:
    history, final = clean()
    final.events.append(StoredEvent("m2", "confirmed", "confirm-worker:1", {}))
    final.messages["m2"] = _message("m2", "sent")
    found = check(history, final)
    assert "transition" in {v.kind for v in found}
    assert any("confirmed by confirm-worker:1 from deleted" in v.detail for v in found)


def test_a_row_disagreeing_with_its_history_is_an_illegal_transition() -> None:
    history, final = clean()
    final.messages["m2"] = _message("m2", "pending-send", delivery_count=0)
    assert kinds(history, final) == {"transition": 1, "loss": 1, "liveness": 1}


def test_dead_with_the_wrong_reason_is_an_illegal_transition() -> None:
    history, final = clean()
    final.events.append(StoredEvent("m1", "dead", "w", {"reason": "check-exhausted"}))
    assert kinds(history, final) == {"transition": 1}


def test_confirm_and_cancel_both_answered_2xx_contradict() -> None:
    history, final = clean()
    history.ops.append(Op("confirm", A, "m2", 200, "sent", A))
    found = [v for v in check(history, final) if v.kind == "transition"]
    assert [v.detail for v in found] == ["both confirm and cancel answered 2xx"]


def test_an_unsettled_message_after_the_budget_is_a_liveness_violation() -> None:
    history, final = clean()
    history.truth["m6"] = OPEN
    final.messages["m6"] = _message("m6", "pending-send", delivery_count=0, overdue=12.5)
    final.events += _events("m6", "prepared")
    found = check(history, final)
    assert [(v.kind, v.message_id) for v in found] == [("liveness", "m6")]
    assert "+12.5s past its due time" in found[0].detail


def test_a_probe_that_reached_another_apps_message_breaks_isolation() -> None:
    history, final = clean()
    history.ops.append(Op("probe", B, "m1", 200, "done", A))
    assert kinds(history, final) == {"isolation": 1}


def test_a_probe_told_the_message_exists_breaks_isolation() -> None:
    history, final = clean()
    history.ops += [Op("probe", B, "m1", 409), Op("probe", B, "m2", 503), Op("probe", B, "m2", 429)]
    assert [(v.kind, v.message_id) for v in check(history, final)] == [("isolation", "m1")]


def test_an_answer_carrying_another_apps_message_breaks_isolation() -> None:
    history, final = clean()
    history.ops.append(Op("confirm", B, "m1", 200, "done", A))
    assert kinds(history, final) == {"isolation": 1}


def test_a_change_by_a_foreign_app_breaks_isolation() -> None:
    history, final = clean()
    final.events.append(StoredEvent("m2", "checked", f"app:{B}", {}))
    assert kinds(history, final) == {"isolation": 1}


def test_a_record_published_under_the_wrong_app_breaks_isolation() -> None:
    history, final = clean()
    history.consumed.append(Consumed("m1", B, f"{A}.t", 1))
    assert kinds(history, final) == {"isolation": 1}
