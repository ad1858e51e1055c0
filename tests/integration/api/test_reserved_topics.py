"""The ack topic and Kafka's internal topics are never produce topics, whatever an app's globs
(design section 4): 403 on every produce route, 422 for an app that names them."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.api.helpers import assert_problem, stored
from tests.support import CHECK_PREFIX, Api


def _body(topic: str) -> dict[str, Any]:
    return {"topic": topic, "payload": {"n": 1}, "check_url": CHECK_PREFIX + "check"}


def _reserved(api: Api) -> list[str]:
    return [api.settings.ack_topic, "__consumer_offsets", "__transaction_state", "__x"]


async def test_every_produce_route_refuses_reserved_topics_with_403(api: Api) -> None:
    app = await api.create_app("producer", produce=["*", "rms.*", "_*"])
    for topic in _reserved(api):
        for path, body in (
            ("/v1/messages", _body(topic)),
            ("/v1/messages/send", _body(topic)),
            ("/v1/messages/batch", {"messages": [_body("orders.ok"), _body(topic)]}),
            ("/v1/transactions", {"check_url": CHECK_PREFIX + "check",
                                  "messages": [{"topic": "orders.ok", "payload": 1},
                                               {"topic": topic, "payload": 2}]}),
        ):
            response = await api.post(app, path, json=body)
            assert_problem(response, 403, contains="reserved")
    assert await stored(api) == []
    ordinary = await api.post(app, "/v1/messages", json=_body("rms.other"))
    assert ordinary.status_code == 201, ordinary.text


@pytest.mark.parametrize("pattern", ["ACK", "__consumer_offsets", "__*", "__transaction?"])
async def test_an_app_naming_a_reserved_topic_is_422(api: Api, pattern: str) -> None:
    named = api.settings.ack_topic if pattern == "ACK" else pattern
    body = {"name": "writer", "produce_topics": ["orders.*", named],
            "consume_topics": ["*"], "check_url_prefixes": [CHECK_PREFIX]}
    response = await api.client.post("/v1/admin/apps", json=body, headers=api.admin)
    assert_problem(response, 422, contains=named)
    listed = await api.client.get("/v1/admin/apps", headers=api.admin)
    assert listed.json()["apps"] == []


async def test_consuming_the_ack_topic_pattern_stays_allowed(api: Api) -> None:
    """Only produce patterns are restricted: consume patterns may name anything."""
    app = await api.create_app("reader", produce=["orders.*"],
                               consume=[api.settings.ack_topic, "__*"])
    assert app.api_key
