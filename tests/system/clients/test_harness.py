"""The live RMS the client libraries' suites run against: a message prepared over real HTTP
is confirmed, published and acknowledged through the processes the harness started."""

from __future__ import annotations

import uuid

import httpx

from tests.conftest import ADMIN_TOKEN
from tests.system.clients.fixtures import LiveRms


def test_the_live_rms_takes_a_message_through_to_done(live_rms: LiveRms,
                                                      client_env: dict[str, str]) -> None:
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    prefix = client_env["RMS_TEST_PREFIX"]
    with httpx.Client(base_url=live_rms.url, timeout=10) as http:
        created = http.post("/v1/admin/apps", headers=admin, json={
            "name": f"{prefix}-orders", "produce_topics": [f"orders.{prefix}"],
            "consume_topics": [f"orders.{prefix}"],
            "check_url_prefixes": ["http://127.0.0.1:1/"]})
        assert created.status_code == 201, created.text
        app = {"Authorization": f"Bearer {created.json()['api_key']}"}
        message_id = f"m-{uuid.uuid4().hex}"
        prepared = http.post("/v1/messages", headers=app, json={
            "message_id": message_id, "topic": f"orders.{prefix}", "payload": {"n": 1},
            "check_url": "http://127.0.0.1:1/check"})
        assert prepared.status_code == 201, prepared.text
        assert http.post(f"/v1/messages/{message_id}/confirm",
                         headers=app).json()["delivery_count"] == 1
        acked = http.post(f"/v1/messages/{message_id}/ack", headers=app)
        assert acked.json()["state"] == "done", acked.text
