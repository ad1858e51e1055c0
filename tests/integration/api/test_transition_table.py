"""The transition table (rms.domain.transitions) walked against the real database: every row,
rendered by the store, moves a message from its source state to its target, appends its event
and has exactly its column effects; the coalesced SQL text writes what the Core form writes;
a repeat in an "already there" state answers with the message unchanged."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import ARRAY, Text, func, literal, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.domain import phase
from rms.domain import transitions as table
from rms.domain.models import NewMessage
from rms.domain.states import State
from rms.store.messages import MessageStore
from rms.store.schema import message_events, messages
from rms.store.subscriptions.store import SubscriptionStore
from rms.store.transitions import core_values, event_of, with_event
from tests.support import CHECK_PREFIX, Api

GIVEN: dict[str, Any] = {"delay": 30.0, "lease": 45.0, "due": 60.0, "retry": 5.0,
                         "token": "claim-token", "reason": "timeout", "consumer": "consumer",
                         "via": "http", "remaining": [], "exhausted": ["spent"]}
# the app that consumes every test topic: the subscriber of each message confirmed
CONSUMER = GIVEN["consumer"]
# how a message reaches each source state, through the table itself
ROUTE = {State.PENDING_SEND: [], State.SENT: [table.CONFIRM], State.DONE: [table.CONFIRM,
                                                                            table.ACK],
         State.DELETED: [table.CANCEL]}
STORED = [t for t in table.TABLE if t.sources]


def _draft(message_id: str, topic: str, ordered: bool = False) -> NewMessage:
    return NewMessage(message_id=message_id, topic=topic, key="k" if ordered else None,
                      payload={"n": 1}, headers={}, check_url=CHECK_PREFIX + "check",
                      check_after_seconds=10.0, max_checks=3, ack_timeout_seconds=60.0,
                      max_deliveries=3, ordered=ordered)


class _Drawn:
    """Any value a sequence hands out (a positive integer)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, int) and other > 0

    def __hash__(self) -> int:
        return 0


class _Acked:
    """``acks`` with the consumer's ack added to ``before``: at a time, by the given path."""

    def __init__(self, before: dict[str, Any] | None) -> None:
        self.before = before or {}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, dict) or set(other) != set(self.before) | {CONSUMER}:
            return False
        added = other[CONSUMER]
        return (added["via"] == GIVEN["via"] and datetime.fromisoformat(added["at"]) is not None
                and {k: v for k, v in other.items() if k != CONSUMER} == self.before)

    def __hash__(self) -> int:
        return 0


def _engine(api: Api) -> AsyncEngine:
    engine: AsyncEngine = api.client._transport.app.state.engine  # type: ignore[attr-defined]
    return engine


async def _row(engine: AsyncEngine, message_id: str) -> dict[str, Any]:
    async with engine.connect() as conn:
        row = (await conn.execute(select(messages).where(messages.c.message_id == message_id))
               ).one()
    return dict(row._mapping)


async def _events(engine: AsyncEngine, message_id: str) -> list[str]:
    statement = (select(message_events.c.event).where(message_events.c.message_id == message_id)
                 .order_by(message_events.c.id))
    async with engine.connect() as conn:
        return list((await conn.execute(statement)).scalars())


async def _now(engine: AsyncEngine) -> datetime:
    async with engine.connect() as conn:
        moment: datetime = (await conn.execute(select(func.now()))).scalar_one()
    return moment


async def _apply(engine: AsyncEngine, message_id: str, change: table.Transition) -> bool:
    """The Core form, guarded by the source state, with the event when the row has one."""
    given = {name: literal(value, ARRAY(Text)) if isinstance(value, list) else literal(value)
             for name, value in GIVEN.items()}
    changed = (update(messages)
               .where(messages.c.message_id == message_id,
                      messages.c.state == change.source.value)
               .values(**core_values(change, given)).returning(*messages.c).cte("changed"))
    statement = (with_event(changed, event_of(change), "t", {}) if change.event is not None
                 else select(changed))
    async with engine.begin() as conn:
        return (await conn.execute(statement)).first() is not None


def _expect(effect: table.Effect, before: dict[str, Any], window: tuple[datetime, datetime]
            ) -> tuple[Any, Any]:
    """The (lowest, highest) value a column may hold after ``effect``."""
    given = before | {"consumer": CONSUMER}
    effect = table.chosen(effect, lambda term: phase.holds_on(term, given, window[0]))
    if isinstance(effect, table.Subscribers):
        return [CONSUMER], [CONSUMER]
    if isinstance(effect, table.OwedSetting):  # the consumer app has no setting of its own
        return before[effect.name], before[effect.name]
    if isinstance(effect, table.AckAdded):
        return _Acked(before["acks"]), _Acked(before["acks"])
    if isinstance(effect, table.NextInSequence):
        return _Drawn(), _Drawn()
    if isinstance(effect, table.Now):
        return window
    if isinstance(effect, table.Column):
        return before[effect.name], before[effect.name]
    if isinstance(effect, table.Given):
        return GIVEN[effect.name], GIVEN[effect.name]
    if isinstance(effect, table.Plus):
        return before[effect.name] + effect.by, before[effect.name] + effect.by
    if isinstance(effect, table.Later):
        source = effect.seconds
        amount = (GIVEN[source.name] if isinstance(source, table.Given)
                  else before[source.name])  # a Column, or an OwedSetting the app leaves be
        return window[0] + timedelta(seconds=amount), window[1] + timedelta(seconds=amount)
    return effect, effect


async def _prepared_in(api: Api, topic: str, message_id: str, state: State,
                       ordered: bool = False) -> None:
    if "producer" not in api.apps:
        await api.create_app("producer", consume=["none"])
        await api.create_app(CONSUMER, produce=["none"], consume=[topic])
    engine = _engine(api)
    await MessageStore(engine).prepare("producer", _draft(message_id, topic, ordered),
                                       one_shot=False)
    for step in ROUTE[state]:
        assert await _apply(engine, message_id, step)


@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
@pytest.mark.parametrize("change", STORED, ids=[t.action for t in STORED])
async def test_each_row_has_exactly_its_effects(api: Api, topic: str,
                                                change: table.Transition, ordered: bool) -> None:
    engine = _engine(api)
    await _prepared_in(api, topic, "m", change.source, ordered)
    before, history = await _row(engine, "m"), await _events(engine, "m")
    start = await _now(engine)
    assert await _apply(engine, "m", change)
    after, window = await _row(engine, "m"), (start, await _now(engine))
    assert after["state"] == change.target.value
    for column, effect in change.effects.items():
        low, high = _expect(effect, before, window)
        assert low <= after[column] <= high if isinstance(low, datetime) \
            else after[column] == low, column
    untouched = set(before) - set(change.effects)
    assert {c: after[c] for c in untouched} == {c: before[c] for c in untouched}
    appended = [change.event.value] if change.event is not None else []
    assert await _events(engine, "m") == history + appended


@pytest.mark.parametrize("change", STORED, ids=[t.action for t in STORED])
async def test_a_row_never_applies_outside_its_source_states(
        api: Api, topic: str, change: table.Transition) -> None:
    engine = _engine(api)
    for state in set(ROUTE) - change.sources:
        await _prepared_in(api, topic, f"m-{state.value}", state)
        before = await _row(engine, f"m-{state.value}")
        assert not await _apply(engine, f"m-{state.value}", change)
        assert await _row(engine, f"m-{state.value}") == before


@pytest.mark.parametrize("change", [table.CONFIRM, table.CANCEL, table.ACK],
                         ids=["confirm", "cancel", "ack"])
async def test_coalesced_text_and_core_write_the_same_row(
        api: Api, topic: str, change: table.Transition) -> None:
    engine = _engine(api)
    store = MessageStore(engine)
    for message_id in ("batched", "alone"):
        await _prepared_in(api, topic, message_id, change.source)
    # the statement production runs against the Core form of the same row (as _apply has it)
    if change is table.ACK:  # its own statement (rms.store.subscriptions.acks)
        assert (await SubscriptionStore(engine).ack("batched", CONSUMER, GIVEN["via"]))[1]
    else:
        assert (await store.transition("batched", change, app=None, actor="t"))[1]
    assert await _apply(engine, "alone", change)
    rows = [await _row(engine, message_id) for message_id in ("batched", "alone")]
    plain = [{k: v for k, v in row.items()
              if not isinstance(v, datetime) and k not in {"message_id", "acks"}}
             for row in rows]
    assert [set(row["acks"] or {}) for row in rows] == [set(rows[0]["acks"] or {})] * 2
    assert plain[0] == plain[1]
    nulls = [{k for k, v in row.items() if v is None} for row in rows]
    assert nulls[0] == nulls[1]


@pytest.mark.parametrize("change", [table.CONFIRM, table.CANCEL, table.ACK],
                         ids=["confirm", "cancel", "ack"])
async def test_a_repeat_in_an_already_state_answers_unchanged(
        api: Api, topic: str, change: table.Transition) -> None:
    engine = _engine(api)
    store = MessageStore(engine)
    for state in change.already:
        message_id = f"m-{state.value}"
        await _prepared_in(api, topic, message_id, state)
        before = await _row(engine, message_id)
        message, changed = (await SubscriptionStore(engine).ack(message_id, CONSUMER, "http")
                            if change is table.ACK
                            else await store.transition(message_id, change, app=None, actor="t"))
        assert message is not None
        assert (changed, message.state) == (False, state)
        assert await _row(engine, message_id) == before


@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
@pytest.mark.parametrize("one_shot", [False, True], ids=["prepare", "send"])
async def test_new_rows_have_the_effects_of_their_row(api: Api, topic: str,
                                                      one_shot: bool, ordered: bool) -> None:
    engine = _engine(api)
    change = table.new_message(one_shot)
    app = await api.create_app("producer", consume=["none"])
    await api.create_app(CONSUMER, produce=["none"], consume=[topic])
    start = await _now(engine)
    await MessageStore(engine).prepare(app.name, _draft("new", topic, ordered),
                                       one_shot=one_shot)
    after, window = await _row(engine, "new"), (start, await _now(engine))
    assert after["state"] == change.target.value
    for column, effect in change.effects.items():
        low, high = _expect(effect, after, window)
        assert low <= after[column] <= high if isinstance(low, datetime) \
            else after[column] == low, column
    # a row that got a delivery reserved has its publish in the history after its own event
    publishing = ["publishing"] if after["delivery_count"] > after["delivery_base"] else []
    assert change.reserves or not publishing
    assert await _events(engine, "new") == [event_of(change).value, *publishing]
