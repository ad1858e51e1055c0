"""Auth (admin token vs app keys) and app registration (design section 4, Apps)."""

from __future__ import annotations

import pytest

from tests.integration.api.helpers import assert_problem
from tests.support import CHECK_PREFIX, Api

ADMIN_CALLS = [
    ("GET", "/v1/admin/apps"),
    ("POST", "/v1/admin/apps"),
    ("GET", "/v1/admin/apps/someone"),
    ("POST", "/v1/admin/apps/someone/rotate-key"),
    ("GET", "/v1/admin/messages"),
    ("GET", "/v1/admin/messages/m1"),
    ("GET", "/v1/admin/messages/m1/events"),
    ("POST", "/v1/admin/messages/m1/confirm"),
    ("POST", "/v1/admin/messages/m1/cancel"),
    ("POST", "/v1/admin/messages/m1/resend"),
    ("GET", "/v1/admin/stats"),
]

APP_CALLS = [
    ("POST", "/v1/messages"),
    ("POST", "/v1/messages/send"),
    ("POST", "/v1/messages/batch"),
    ("POST", "/v1/messages/batch/confirm"),
    ("POST", "/v1/messages/batch/cancel"),
    ("POST", "/v1/messages/m1/confirm"),
    ("POST", "/v1/messages/m1/cancel"),
    ("POST", "/v1/messages/m1/ack"),
    ("GET", "/v1/messages/m1"),
    ("GET", "/v1/messages/m1/events"),
]


def _body(method: str) -> dict[str, object] | None:
    return {"name": "x"} if method == "POST" else None


async def test_admin_endpoints_refuse_missing_wrong_and_app_tokens(api: Api) -> None:
    app = await api.create_app("producer")
    bad_headers: list[dict[str, str]] = [
        {},
        {"Authorization": "Bearer not-the-admin-token"},
        {"Authorization": f"Basic {api.admin_token}"},
        {"Authorization": "Bearer "},
        app.headers,
    ]
    for method, path in ADMIN_CALLS:
        for headers in bad_headers:
            response = await api.client.request(method, path, headers=headers,
                                                json=_body(method))
            assert_problem(response, 401)


async def test_app_endpoints_refuse_missing_wrong_and_admin_tokens(api: Api) -> None:
    bad_headers: list[dict[str, str]] = [
        {}, {"Authorization": "Bearer rms_wrong"}, api.admin,
    ]
    for method, path in APP_CALLS:
        for headers in bad_headers:
            response = await api.client.request(method, path, headers=headers,
                                                json=_body(method))
            assert_problem(response, 401)


async def test_create_app_returns_secrets_once(api: Api, topic: str) -> None:
    body = {"name": "billing", "produce_topics": ["orders.*"], "consume_topics": ["acks.*"],
            "check_url_prefixes": [CHECK_PREFIX]}
    created = await api.client.post("/v1/admin/apps", json=body, headers=api.admin)
    assert created.status_code == 201, created.text
    data = created.json()
    assert data["name"] == "billing"
    assert data["produce_topics"] == ["orders.*"]
    assert data["consume_topics"] == ["acks.*"]
    assert data["check_url_prefixes"] == [CHECK_PREFIX]
    assert isinstance(data["api_key"], str) and len(data["api_key"]) >= 16
    assert isinstance(data["signing_secret"], str) and len(data["signing_secret"]) >= 16

    listed = await api.client.get("/v1/admin/apps", headers=api.admin)
    assert listed.status_code == 200
    apps = listed.json()["apps"]
    assert [a["name"] for a in apps] == ["billing"]
    one = await api.client.get("/v1/admin/apps/billing", headers=api.admin)
    assert one.status_code == 200
    for shown in (apps[0], one.json()):
        assert "api_key" not in shown and "signing_secret" not in shown
        assert data["api_key"] not in str(shown) and data["signing_secret"] not in str(shown)
        assert shown["produce_topics"] == ["orders.*"]

    # the new key works on the app endpoints
    headers = {"Authorization": f"Bearer {data['api_key']}"}
    prepared = await api.client.post("/v1/messages", headers=headers, json={
        "topic": topic, "payload": 1, "check_url": CHECK_PREFIX + "c"})
    assert prepared.status_code == 201, prepared.text


async def test_duplicate_app_name_conflicts(api: Api) -> None:
    first = await api.create_app("dup")
    again = await api.client.post("/v1/admin/apps", json={"name": "dup"}, headers=api.admin)
    assert_problem(again, 409, contains="dup")
    # the first app's key still works
    response = await api.client.get("/v1/messages/nothing", headers=first.headers)
    assert_problem(response, 404)


@pytest.mark.parametrize("body", [
    {"name": "Bad Name"},
    {"name": ""},
    {"name": "-leading-dash"},
    {"name": "x" * 64},
    {},
    {"name": "ok", "produce_topics": "orders"},
    {"name": "ok", "check_url_prefixes": ["ftp://x/"]},
    {"name": "ok", "check_url_prefixes": ["not a url"]},
    {"name": "ok", "check_url_prefixes": ["http://user:pw@example.com/"]},
    {"name": "ok", "default_check_url": "ftp://x/check"},
    {"name": "ok", "unknown_field": 1},
    # at most 100 patterns a list, each at most 249 characters
    {"name": "ok", "consume_topics": [f"t{i}.*" for i in range(101)]},
    {"name": "ok", "produce_topics": [f"t{i}" for i in range(101)]},
    {"name": "ok", "ordered_topics": [f"t{i}" for i in range(101)]},
    {"name": "ok", "check_url_prefixes": [f"http://h{i}.example/" for i in range(101)]},
    {"name": "ok", "consume_topics": ["*a" * 125]},
])
async def test_invalid_app_definitions_are_422(api: Api, body: dict[str, object]) -> None:
    response = await api.client.post("/v1/admin/apps", json=body, headers=api.admin)
    assert_problem(response, 422)
    listed = await api.client.get("/v1/admin/apps", headers=api.admin)
    assert listed.json()["apps"] == []


async def test_an_app_may_hold_a_hundred_patterns_and_no_more(api: Api) -> None:
    many = [f"t{i}.*" for i in range(100)]
    created = await api.client.post("/v1/admin/apps", headers=api.admin, json={
        "name": "wide", "consume_topics": many})
    assert created.status_code == 201, created.text
    for path, field in (("consume-topics", "consume_topics"), ("ordered-topics", "ordered_topics")):
        too_many = await api.client.put(f"/v1/admin/apps/wide/{path}", headers=api.admin,
                                        json={field: [*many, "one.more"]})
        assert_problem(too_many, 422, contains="100")
    stored = await api.client.get("/v1/admin/apps/wide", headers=api.admin)
    assert stored.json()["consume_topics"] == many


async def test_unknown_app_is_404(api: Api) -> None:
    assert_problem(await api.client.get("/v1/admin/apps/ghost", headers=api.admin), 404)
    assert_problem(await api.client.post("/v1/admin/apps/ghost/rotate-key", headers=api.admin),
                   404)


async def test_rotate_key_retires_the_old_key(api: Api, topic: str) -> None:
    app = await api.create_app("rotating")
    # the old key is used (and cached) before the rotation
    assert (await api.prepare(app, topic, message_id="before")).status_code == 201
    rotated = await api.client.post("/v1/admin/apps/rotating/rotate-key", headers=api.admin)
    assert rotated.status_code == 200, rotated.text
    data = rotated.json()
    assert data["name"] == "rotating"
    assert data["api_key"] != app.api_key
    assert data["signing_secret"] == app.signing_secret  # not asked to rotate it
    assert data["key_rotated_at"] is not None

    old = await api.client.get("/v1/messages/before", headers=app.headers)
    assert_problem(old, 401)
    new_headers = {"Authorization": f"Bearer {data['api_key']}"}
    new = await api.client.get("/v1/messages/before", headers=new_headers)
    assert new.status_code == 200, new.text
    assert new.json()["message_id"] == "before"


async def test_rotate_key_can_rotate_the_signing_secret(api: Api) -> None:
    app = await api.create_app("secretive")
    rotated = await api.client.post("/v1/admin/apps/secretive/rotate-key", headers=api.admin,
                                    json={"rotate_signing_secret": True})
    assert rotated.status_code == 200, rotated.text
    assert rotated.json()["signing_secret"] != app.signing_secret
