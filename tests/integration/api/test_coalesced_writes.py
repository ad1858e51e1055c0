"""Coalesced request writes (rms.store.coalesced) against the real database: the batched SQL
writes exactly what the single-row Core statements write, concurrent requests each get their
own answer, and a refused item or a killed connection never takes other requests with it."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from typing import Any

import pytest
from sqlalchemy import text

from rms.domain.models import NewMessage
from rms.domain.transitions import CANCEL, CONFIRM, Transition
from rms.store.database import create_engine
from rms.store.messages import MessageStore
from tests.integration.api.helpers import assert_problem, events
from tests.support import CHECK_PREFIX, Api

COMPARED = ("state", "dead", "dead_reason", "check_count", "delivery_count", "delivery_base",
            "claim_token")
STAMPS = ("confirmed_at", "done_at", "deleted_at", "next_check_at", "next_delivery_at")


def _draft(message_id: str, topic: str, **fields: Any) -> NewMessage:
    values: dict[str, Any] = {
        "message_id": message_id, "topic": topic, "key": None, "payload": {"n": 1},
        "headers": {}, "check_url": CHECK_PREFIX + "check", "check_after_seconds": 10.0,
        "max_checks": 3, "ack_timeout_seconds": 60.0, "max_deliveries": 3} | fields
    return NewMessage(**values)


# (an ack has one statement, rms.store.acks: its text and Core forms are compared in
# tests/integration/api/test_transition_table.py)
@pytest.mark.parametrize("path", [[CONFIRM], [CANCEL]], ids=["confirm", "cancel"])
async def test_batched_and_single_row_transitions_write_the_same_row(
        api: Api, topic: str, path: list[Transition]) -> None:
    app = await api.create_app("producer")
    store = MessageStore(api.client._transport.app.state.engine)  # type: ignore[attr-defined]
    for message_id in ("batched", "alone"):
        await store.prepare(app.name, _draft(message_id, topic), one_shot=False)
    for change in path:
        _, did = await store.transition("batched", change, app=app.name, actor="t")
        assert did
        _, did = await store.transition("alone", change, app=app.name, actor="t",
                                        coalesced=False)
        assert did
    batched = dataclasses.asdict(await store.get("batched"))
    alone = dataclasses.asdict(await store.get("alone"))
    assert {k: batched[k] for k in COMPARED} == {k: alone[k] for k in COMPARED}
    assert [batched[k] is None for k in STAMPS] == [alone[k] is None for k in STAMPS]
    assert [e["event"] for e in await events(api, "batched")] == [
        e["event"] for e in await events(api, "alone")]


async def test_concurrent_prepares_each_get_their_own_answer(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    await api.prepare(app, topic, message_id="taken", payload={"v": 1})
    requests = (
        [api.prepare(app, topic, message_id=f"new-{n}") for n in range(40)]
        + [api.prepare(app, topic, message_id="twice", payload={"v": 2}) for _ in range(10)]
        + [api.prepare(app, topic, message_id="taken", payload={"v": "other"}) for _ in range(5)]
        + [api.prepare(app, topic, message_id="nul", payload={"v": "a\u0000b"})]
    )
    responses = await asyncio.gather(*requests)
    codes = [r.status_code for r in responses]
    assert codes[:40] == [201] * 40
    assert Counter(codes[40:50]) == {201: 1, 200: 9}
    assert codes[50:55] == [409] * 5
    assert_problem(responses[55], 422, contains="NUL")
    for message_id in ("new-0", "new-39", "twice"):
        assert [e["event"] for e in await events(api, message_id)] == ["prepared"]
    missing = await api.client.get("/v1/messages/nul", headers=app.headers)
    assert missing.status_code == 404


async def test_a_row_postgresql_refuses_fails_alone(api: Api, topic: str) -> None:
    """Bypassing the API's validation, a NUL in a text column makes PostgreSQL refuse the
    whole batched statement; every other request in that batch is still stored."""
    app = await api.create_app("producer")
    store = MessageStore(api.client._transport.app.state.engine)  # type: ignore[attr-defined]
    drafts = [_draft(f"ok-{n}", topic) for n in range(20)]
    drafts.insert(10, _draft("bad", topic, key="a\x00b"))
    outcomes = await asyncio.gather(
        *(store.prepare(app.name, draft, one_shot=False) for draft in drafts),
        return_exceptions=True)
    failed = [d.message_id for d, o in zip(drafts, outcomes, strict=True)
              if isinstance(o, BaseException)]
    assert failed == ["bad"]
    assert all(created for o in outcomes if not isinstance(o, BaseException)
               for _, created in [o])


async def test_terminated_connections_answer_503_then_recover(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    assert (await api.prepare(app, topic, message_id="before")).status_code == 201
    admin = create_engine(api.settings, pool_size=1)
    try:
        async with admin.begin() as conn:
            killed = (await conn.execute(text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"))).scalar_one()
    finally:
        await admin.dispose()
    assert killed >= 1
    codes = []
    for n in range(api.settings.db_pool_size + 2):
        response = await api.prepare(app, topic, message_id=f"after-{n}")
        codes.append(response.status_code)
        if response.status_code == 503:
            assert_problem(response, 503)
        if response.status_code == 201:
            break
    assert set(codes) <= {201, 503}, codes
    assert codes[-1] == 201, codes


async def test_direct_json_matches_the_response_model(api: Api, topic: str) -> None:
    """The request path writes message JSON with orjson; the admin API (and the OpenAPI
    document) use ``MessageOut``: both must give the same bytes."""
    from message_service.api.convert import message_out, message_response

    app = await api.create_app("producer")
    message_id = await api.prepared_id(app, topic, key="k", headers={"h": "v"},
                                       payload={"f": 1.5, "list": [1, "two", None]})
    await api.post(app, f"/v1/messages/{message_id}/confirm")
    store = MessageStore(api.client._transport.app.state.engine)  # type: ignore[attr-defined]
    message = await store.get(message_id)
    assert message.confirmed_at is not None and message.done_at is None
    assert bytes(message_response(message).body) == message_out(message).model_dump_json().encode()
