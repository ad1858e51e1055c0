"""The README's five-minute walkthrough, as HTTP calls against any running ``rms serve``: the
check that a released server (a wheel, the image) behaves as the README says."""

from __future__ import annotations

import uuid

import httpx


def register(api: httpx.Client, admin: dict[str, str], name: str, **topics: list[str]) -> str:
    """A new app; its API key."""
    created = api.post("/v1/admin/apps", headers=admin, json={
        "name": name, "check_url_prefixes": ["http://127.0.0.1:8001/"], **topics})
    assert created.status_code == 201, created.text
    return str(created.json()["api_key"])


def walkthrough(url: str, admin_token: str, topic: str) -> None:
    """Prepare, confirm (published), ack (done), the history, a cancel and its refused confirm,
    the operators' stats: the README's steps 1-7 with the answers it shows."""
    admin = {"Authorization": f"Bearer {admin_token}"}
    suffix = uuid.uuid4().hex[:8]
    with httpx.Client(base_url=url, timeout=30) as api:
        orders = {"Authorization": "Bearer " + register(api, admin, f"orders-{suffix}",
                                                        produce_topics=[topic])}
        points = {"Authorization": "Bearer " + register(api, admin, f"points-{suffix}",
                                                        consume_topics=[topic])}
        paid, cancelled = f"order-1-paid-{suffix}", f"order-2-paid-{suffix}"
        prepared = api.post("/v1/messages", headers=orders, json={
            "message_id": paid, "topic": topic, "key": "customer-7",
            "payload": {"order": 1, "customer": "customer-7", "total": 42.5},
            "check_url": "http://127.0.0.1:8001/rms/check"})
        assert (prepared.status_code, prepared.json()["state"]) == (201, "pending-send"), prepared.text
        confirmed = api.post(f"/v1/messages/{paid}/confirm", headers=orders).json()
        assert (confirmed["state"], confirmed["delivery_count"]) == ("sent", 1), confirmed
        acked = api.post(f"/v1/messages/{paid}/ack", headers=points).json()
        assert acked["state"] == "done", acked
        events = api.get(f"/v1/messages/{paid}/events", headers=orders).json()["events"]
        assert [event["event"] for event in events] == ["prepared", "confirmed", "published", "acked"]
        api.post("/v1/messages", headers=orders, json={
            "message_id": cancelled, "topic": topic, "payload": {"order": 2},
            "check_url": "http://127.0.0.1:8001/rms/check"}).raise_for_status()
        assert api.post(f"/v1/messages/{cancelled}/cancel", headers=orders).json()["state"] == "deleted"
        refused = api.post(f"/v1/messages/{cancelled}/confirm", headers=orders)
        assert refused.status_code == 409
        assert refused.json()["current_state"] == "deleted"
        totals = api.get("/v1/admin/stats", headers=admin).json()["totals"]
        assert (totals["done"], totals["deleted"]) == (1, 1), totals
