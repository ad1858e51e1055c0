from __future__ import annotations

from tests.support import Api, read_topic


async def test_prepare_confirm_publishes(api: Api, topic: str) -> None:
    app = await api.create_app("orders")
    message_id = await api.prepared_id(app, topic, key="k1", payload={"order": 42})
    confirmed = await api.post(app, f"/v1/messages/{message_id}/confirm")
    assert confirmed.status_code == 200
    assert confirmed.json()["state"] == "sent"
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1)
    assert [r.key for r in records] == [b"k1"]
