"""The demo points service (``python -m rms.devstack.demo.points``), in process: "order paid -> points
added" end to end, once per message, with acks on the ack topic."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from rms.devstack.demo.points import Config, create_app, points_for
from rms.devstack.embedded import EmbeddedPostgres
from tests.support import Api, eventually


@pytest.fixture
def points_database(postgres: EmbeddedPostgres) -> Iterator[str]:
    name = f"points_{uuid.uuid4().hex[:12]}"
    postgres.create_database(name)
    yield postgres.url(name)
    postgres.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_order_paid_adds_points_once(acks_api: Api, points_database: str,
                                           unique: str) -> None:
    api = acks_api
    orders = await api.create_app("orders", produce=["orders.*"], consume=["none"])
    points_app = await api.create_app("points", produce=["none"], consume=["orders.*"])
    topic = f"orders.paid.{unique}"
    config = Config(rms_url="http://unused", api_key="unused", database_url=points_database,
                    bootstrap_servers=api.settings.kafka_bootstrap_servers, topic=topic,
                    group_id=f"demo-points-{unique}", ack_mode="topic", consumer_app="points",
                    signing_secret=points_app.signing_secret, ack_topic=api.settings.ack_topic,
                    port=0)
    service = create_app(config)
    async with (service.router.lifespan_context(service),
                httpx.AsyncClient(transport=httpx.ASGITransport(app=service),
                                  base_url="http://points.test") as points):
        ids = []
        for order, total in ((1, 12.5), (2, 3)):
            response = await api.post(orders, "/v1/messages/send", json={
                "message_id": f"order-{order}-paid-{unique}", "topic": topic,
                "payload": {"order": order, "customer": "c1", "total": total},
                "check_url": "http://127.0.0.1:1/check"})
            assert response.status_code == 201, response.text
            ids.append(response.json()["message_id"])

        async def balance() -> bool:
            body = (await points.get("/points/c1")).json()
            return bool(body["points"] == 15)

        await eventually(balance, timeout=30)
        ledger = (await points.get(f"/points/ledger/{ids[0]}")).json()
        assert ledger == {"message_id": ids[0], "processed": True, "customer": "c1",
                          "points": 12, "delivery": 1}
        assert (await points.get("/points")).json() == {"c1": 15}

        async def all_done() -> bool:
            states = [(await api.client.get(f"/v1/admin/messages/{i}",
                                            headers=api.admin)).json()["state"] for i in ids]
            return states == ["done", "done"]

        await eventually(all_done, timeout=30)


def test_points_for_reads_the_order_payload() -> None:
    assert points_for({"customer": "c7", "total": 99.9}) == ("c7", 99)
    assert points_for({"customer_id": 5, "amount": 3}) == ("5", 3)
    assert points_for({"customer": "c1", "points": 40, "total": 1000}) == ("c1", 40)
    assert points_for({"order": 1}) == ("guest", 1)
    assert points_for([1, 2]) == ("guest", 1)
    assert points_for({"customer": "c1", "total": True}) == ("c1", 1)
