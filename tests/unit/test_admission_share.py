"""The gate's shares (pure logic): only authenticated requests count against the limit, a
request known not to authenticate is answered 401 by the gate, one whose caller the database
could not tell has a small bound of its own, and at the limit of an overloaded gate an app over
its share is refused while an app below its share is still admitted."""

from __future__ import annotations

from message_service.admission import (
    NO_APP,
    REFUSAL,
    RETRY_AFTER_SPREAD,
    UNAUTHORIZED,
    Admission,
    LimitPolicy,
    Ticket,
)

PREPARE = ("POST", "/v1/messages")
CONFIRM = ("POST", "/v1/messages/m-1/confirm")


def _gate(limit: int = 8, unauthenticated: int = 2) -> Admission:
    gate = Admission(LimitPolicy(limit=limit, maximum=2 * limit,
                                 unauthenticated=unauthenticated))
    gate.delay.overloaded = True  # the queue has stood: new work without a place is refused
    return gate


async def test_a_request_known_not_to_authenticate_is_answered_401_and_holds_nothing() -> None:
    gate = _gate(limit=1)
    held = gate.admitted("orders")
    assert gate.answer(*PREPARE, NO_APP) is UNAUTHORIZED
    assert gate.answer(*CONFIRM, NO_APP) is UNAUTHORIZED
    assert gate.answer("GET", "/healthz", NO_APP) is None  # never limited
    assert gate.answer(*PREPARE, "orders") is REFUSAL
    assert gate.inflight == 1 and gate.unauthenticated == 0
    gate.finished(held)
    assert gate.answer(*PREPARE, "orders") is None


async def test_requests_whose_caller_is_undetermined_have_their_own_bound() -> None:
    gate = _gate(limit=8, unauthenticated=2)
    held = [gate.admitted(None) for _ in range(2)]
    assert gate.refuses(*PREPARE, None)
    assert gate.inflight == 0 and not gate.refuses(*PREPARE, "orders")
    gate.finished(held[0])
    assert not gate.refuses(*PREPARE, None)


async def test_at_the_limit_the_app_over_its_share_is_refused_and_the_other_admitted() -> None:
    gate = _gate(limit=8)
    flood = [gate.admitted("flooder") for _ in range(8)]  # the idle places, borrowed
    assert gate.refuses(*PREPARE, "flooder")
    assert not gate.refuses(*PREPARE, "steady")  # below its share (8 // 2)
    steady = [gate.admitted("steady") for _ in range(4)]
    assert gate.refuses(*PREPARE, "steady")  # at its share now
    assert not gate.refuses(*CONFIRM, "flooder")  # finishing work passes up to the maximum
    for ticket in (*flood[:5], *steady):
        gate.finished(ticket)
    assert gate.per_app == {"flooder": 3} and gate.inflight == 3
    assert not gate.refuses(*PREPARE, "flooder")  # below the limit again: any app may borrow


async def test_every_app_has_at_least_one_place() -> None:
    gate = _gate(limit=2)
    tickets: list[Ticket] = [gate.admitted(app) for app in ("a", "b", "c")]
    assert gate.share("d") == 1
    assert not gate.refuses(*PREPARE, "d")
    assert gate.refuses(*PREPARE, "a")
    for ticket in tickets:
        gate.finished(ticket)
    assert gate.per_app == {} and gate.inflight == 0


def _retry_after(gate: Admission, app: str) -> int:
    answer = gate.answer(*PREPARE, app)
    assert answer is not None and answer.status == 503
    return int(dict(answer.headers)[b"retry-after"])


async def test_a_burst_of_refusals_is_told_to_come_back_a_share_per_second() -> None:
    now = [100.0]
    gate = Admission(LimitPolicy(limit=4, maximum=8, interval_seconds=1000.0),
                     clock=lambda: now[0])
    gate.delay.overloaded = True
    held = [gate.admitted("burst") for _ in range(4)]  # the limit (4) is reached
    told = [_retry_after(gate, "burst") for _ in range(4 * 7)]  # its share: 4 (the only app)
    assert told == [1] * 4 + [2] * 4 + [3] * 4 + [4] * 4 + [5] * 12
    assert RETRY_AFTER_SPREAD == 5
    other = [gate.admitted("other") for _ in range(2)]  # below its share (4 // 2) until now
    assert _retry_after(gate, "other") == 1  # another app's refusals are spread on their own
    now[0] += 1.0  # a new second: the spread starts again
    assert _retry_after(gate, "burst") == 1
    for ticket in (*held, *other):
        gate.finished(ticket)
