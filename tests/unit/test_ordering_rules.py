"""The sequencer's rules (rms.domain.ordering) on a key's queue, message by message."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from rms.domain.models import Message
from rms.domain.ordering import Queued, run_of
from rms.domain.states import DeadReason, State

NOW = datetime(2026, 11, 25, tzinfo=UTC)


def _message(n: int, *, deliveries: int = 0, dead: bool = False, claimed: bool = False,
             taken: bool = True) -> Message:
    """Message ``n`` of the key counting ``deliveries``; ``taken``: the broker took the last
    one (recorded in the row)."""
    return Message(
        message_id=f"m{n}", app="ledger", topic="ledger.entries", key="a", payload={},
        headers={}, check_url=None, state=State.SENT, dead=dead,
        dead_reason=DeadReason.DELIVERY_EXHAUSTED if dead else None, check_count=0,
        delivery_count=deliveries, delivery_base=0, check_after_seconds=10.0, max_checks=15,
        ack_timeout_seconds=60.0, max_deliveries=6, created_at=NOW, confirmed_at=NOW,
        done_at=None, deleted_at=None, next_check_at=None, next_delivery_at=NOW,
        claim_token="t" if claimed else None, ordered=True, confirm_seq=n,
        published_delivery=deliveries if deliveries and taken else None)


def _queued(message: Message, due: bool, *, scheduled: bool = False) -> Queued:
    """``message`` read at NOW: due or not yet, delayed past NOW or not."""
    second = timedelta(seconds=1)
    return Queued(replace(message, next_delivery_at=NOW - second if due else NOW + second,
                          deliver_after=NOW + second if scheduled else None), NOW)


def _ids(found: tuple[list[Message], Message | None]) -> tuple[list[str], str | None]:
    run, blocking = found
    return [m.message_id for m in run], None if blocking is None else blocking.message_id


def test_due_messages_go_in_order_past_published_ones() -> None:
    queue = [_queued(_message(1, deliveries=1), False), _queued(_message(2), True),
             _queued(_message(3), True)]
    assert _ids(run_of(queue)) == (["m2", "m3"], None)


def test_a_failed_publish_waiting_for_its_retry_holds_the_key() -> None:
    queue = [_queued(_message(1), False), _queued(_message(2), True)]
    assert _ids(run_of(queue)) == ([], "m1")


def test_a_delivery_counted_but_never_taken_by_the_broker_holds_the_key() -> None:
    """A publish outcome that came after its claim's lease ran out is history only, so the
    row can count a delivery whose publishes all failed: waiting for its retry, it holds."""
    queue = [_queued(_message(1, deliveries=1, taken=False), False), _queued(_message(2), True)]
    assert _ids(run_of(queue)) == ([], "m1")


def test_an_overdue_message_is_redelivered_before_later_ones() -> None:
    queue = [_queued(_message(1, deliveries=1), True), _queued(_message(2), True)]
    assert _ids(run_of(queue)) == (["m1", "m2"], None)


def test_a_dead_message_holds_the_key_and_a_claim_in_flight_too() -> None:
    dead = [_queued(_message(1, deliveries=6, dead=True), False), _queued(_message(2), True)]
    assert _ids(run_of(dead)) == ([], "m1")
    in_flight = [_queued(_message(1, deliveries=1, claimed=True), False),
                 _queued(_message(2), True)]
    assert _ids(run_of(in_flight)) == ([], "m1")
    expired = [_queued(_message(1, deliveries=1, claimed=True), True), _queued(_message(2), True)]
    assert _ids(run_of(expired)) == (["m1", "m2"], None)


def test_messages_held_back_go_right_after_the_one_before_them() -> None:
    resent = replace(_message(1, deliveries=6), delivery_base=6)
    queue = [_queued(resent, True), _queued(_message(2), False), _queued(_message(3), False)]
    assert _ids(run_of(queue)) == (["m1", "m2", "m3"], None)


def test_a_delayed_message_holds_its_key_until_its_time_even_right_after_a_publish() -> None:
    head = [_queued(_message(1), False, scheduled=True), _queued(_message(2), True)]
    assert _ids(run_of(head)) == ([], "m1")
    behind = [_queued(_message(1), True), _queued(_message(2), False, scheduled=True),
              _queued(_message(3), False)]
    assert _ids(run_of(behind)) == (["m1"], "m2")
