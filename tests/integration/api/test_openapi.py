"""OpenAPI document, health, readiness and metrics endpoints."""

from __future__ import annotations

from tests.support import Api

DESIGN_PATHS = [
    "/v1/admin/dead-letters/resend",
    "/v1/admin/report/summary",
    "/v1/messages",
    "/v1/messages/send",
    "/v1/messages/batch",
    "/v1/messages/batch/confirm",
    "/v1/messages/batch/cancel",
    "/v1/messages/{message_id}/confirm",
    "/v1/messages/{message_id}/cancel",
    "/v1/messages/{message_id}/ack",
    "/v1/messages/{message_id}",
    "/v1/messages/{message_id}/events",
    "/v1/apps/me",
    "/v1/admin/apps",
    "/v1/admin/apps/{name}",
    "/v1/admin/apps/{name}/rotate-key",
    "/v1/admin/apps/{name}/ordered-topics",
    "/v1/admin/messages",
    "/v1/admin/messages/{message_id}/resend",
    "/v1/admin/messages/{message_id}/confirm",
    "/v1/admin/messages/{message_id}/cancel",
    "/v1/admin/stats",
    "/v1/admin/transactions",
    "/v1/admin/transactions/{transaction_id}",
    "/healthz",
    "/readyz",
    "/metrics",
]


async def test_openapi_lists_every_path(api: Api) -> None:
    response = await api.client.get("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.")
    missing = [path for path in DESIGN_PATHS if path not in document["paths"]]
    assert missing == []
    prepare = document["paths"]["/v1/messages"]["post"]
    assert {"201", "401", "403", "409", "413", "422"} <= set(prepare["responses"])
    schemas = document["components"]["schemas"]
    assert "ordered_topics" in schemas["AppCreate"]["properties"]
    assert "ordered_topics" in schemas["AppOut"]["properties"]
    assert "ordered" in schemas["MessageOut"]["properties"]
    assert "blocked_keys" in schemas["StatsOut"]["properties"]
    listing = document["paths"]["/v1/admin/transactions"]["get"]
    assert {p["name"] for p in listing["parameters"]} == {"state", "dead", "app", "limit",
                                                          "cursor"}
    assert {"age_seconds", "message_ids", "dead", "state"} <= set(
        schemas["TransactionSummary"]["properties"])


async def test_health_readiness_and_metrics(api: Api, topic: str) -> None:
    health = await api.client.get("/healthz")
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    ready = await api.client.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json() == {"status": "ready", "database": "ok", "broker": "ok"}

    app = await api.create_app("producer")
    message_id = await api.prepared_id(app, topic)
    assert (await api.post(app, f"/v1/messages/{message_id}/confirm")).status_code == 200
    metrics = await api.client.get("/metrics")
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain")
    assert "rms_publishes_total" in metrics.text
    assert "rms_transitions_total" in metrics.text
