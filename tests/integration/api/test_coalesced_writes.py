"""Coalesced request writes (rms.store.coalesced) against the real database: concurrent
requests each get their own answer, and a refused item or a killed connection never takes
other requests with it. (That the batched SQL writes what the Core form of each row writes:
tests/integration/api/test_transition_table.py.)"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from sqlalchemy import text

from rms.domain.models import NewMessage
from rms.store.database import create_engine
from rms.store.messages import MessageStore
from tests.integration.api.helpers import assert_problem, events
from tests.support import CHECK_PREFIX, Api


def _draft(message_id: str, topic: str, **fields: Any) -> NewMessage:
    values: dict[str, Any] = {
        "message_id": message_id, "topic": topic, "key": None, "payload": {"n": 1},
        "headers": {}, "check_url": CHECK_PREFIX + "check", "check_after_seconds": 10.0,
        "max_checks": 3, "ack_timeout_seconds": 60.0, "max_deliveries": 3} | fields
    return NewMessage(**values)


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
