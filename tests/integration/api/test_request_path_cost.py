"""What one caller's requests cost the database, counted (not timed): pooled connections taken
and statements sent per prepare, confirm and ack of the happy path, against the real database
and broker. Each count is the fewest the request path needs; a change that adds a checkout or
a round trip (a BEGIN/ROLLBACK pair of a Core read, a lookup split from its write) fails
here."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support import Api, AppKeys, eventually, produce

COUNTED_AFTER_SECONDS = 0.3  # background work a request hands on (none) would show by then


@dataclass
class Meter:
    """Checkouts of the engine's pool and statements sent on its connections: those asyncpg
    runs itself (its query logger: the raw statements, BEGIN and ROLLBACK) and those Core
    runs as prepared statements (``before_cursor_execute``)."""

    checkouts: int = 0
    statements: list[str] = field(default_factory=list)
    _logged: set[int] = field(default_factory=set)

    def attach(self, engine: AsyncEngine) -> None:
        event.listen(engine.sync_engine.pool, "checkout", self._checkout)
        event.listen(engine.sync_engine, "before_cursor_execute", self._core)

    def _checkout(self, dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        self.checkouts += 1
        driver = dbapi_connection.driver_connection
        if id(driver) not in self._logged:
            self._logged.add(id(driver))
            driver.add_query_logger(lambda logged: self._sent(logged.query))

    def _core(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        self._sent(statement)

    def _sent(self, sql: str) -> None:
        text = " ".join(sql.split())
        if not text.startswith(_INTROSPECTION):
            self.statements.append(text[:60])

    def take(self) -> tuple[int, list[str]]:
        taken = self.checkouts, list(self.statements)
        self.checkouts = 0
        self.statements.clear()
        return taken


# asyncpg's own reads of the types a statement uses, once per connection and type
_INTROSPECTION = ("SELECT current_setting('jit')", "WITH RECURSIVE typeinfo_tree",
                  "SELECT set_config('jit'")


@pytest.fixture
async def metered(api: Api) -> AsyncIterator[Meter]:
    app: FastAPI = api.client._transport.app  # type: ignore[attr-defined]
    app.state.limits.pending.ttl = 3600.0  # the pending-send count: read once, not in the way
    # a key in use is looked up again in the background once per half cache time: not a cost of
    # the request measured, so kept out of the way as the pending count is
    app.state.services.authentication._ttl = 3600.0
    meter = Meter()
    meter.attach(app.state.engine)
    yield meter


async def _cost(api: Api, app: AppKeys, meter: Meter,
                request: Callable[[], Awaitable[httpx.Response]]) -> tuple[int, list[str]]:
    """The checkouts and statements of one request (the app's key cached beforehand, as on
    every request but the first of a few seconds)."""
    await api.client.get("/v1/messages/none", headers=app.headers)
    await _settled()
    meter.take()
    response = await request()
    assert response.status_code in (200, 201), response.text
    await _settled()
    return meter.take()


async def _settled() -> None:
    import asyncio

    await asyncio.sleep(COUNTED_AFTER_SECONDS)


async def test_each_request_of_the_happy_path_takes_one_connection_per_statement(
        api: Api, topic: str, metered: Meter) -> None:
    producer = await api.create_app("orders", consume=["none"])
    consumer = await api.create_app("points", produce=["none"], consume=["orders.*"])
    checkouts, statements = await _cost(api, producer, metered, lambda: api.prepare(
        producer, topic, message_id="m0"))
    assert (checkouts, len(statements)) == (2, 2), statements  # + the app's pending-send count
    checkouts, statements = await _cost(api, producer, metered, lambda: api.prepare(
        producer, topic, message_id="m1"))
    assert (checkouts, len(statements)) == (1, 1), statements  # insert + event
    checkouts, statements = await _cost(api, producer, metered, lambda: api.post(
        producer, "/v1/messages/m1/confirm"))
    assert (checkouts, len(statements)) == (2, 2), statements  # transition; publish recorded
    checkouts, statements = await _cost(api, consumer, metered, lambda: api.post(
        consumer, "/v1/messages/m1/ack"))
    assert (checkouts, len(statements)) == (1, 1), statements  # the permission and the ack


async def test_an_ack_record_costs_three_statements_and_no_transaction_round_trips(
        api: Api, topic: str, metered: Meter) -> None:
    producer = await api.create_app("orders", consume=["none"])
    consumer = await api.create_app("points", produce=["none"], consume=["orders.*"])
    message_id = await api.prepared_id(producer, topic)
    await api.post(producer, f"/v1/messages/{message_id}/confirm")
    ack = await api.ack_body(producer, message_id, "points")
    await _settled()
    metered.take()
    await produce(api.settings.kafka_bootstrap_servers, api.settings.ack_topic, [ack],
                  consumer.signing_secret)

    async def done() -> bool:
        return metered.checkouts >= 3
    await eventually(done)
    await _settled()
    checkouts, statements = metered.take()
    # the consumer's app, the message's topic and instance, the ack itself
    assert (checkouts, len(statements)) == (3, 3), statements
    assert not [s for s in statements if s.startswith(("BEGIN", "ROLLBACK", "COMMIT"))]

