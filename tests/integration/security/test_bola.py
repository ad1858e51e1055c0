"""Per-app isolation (BOLA): every app-token endpoint, taken from the served OpenAPI document so
a new endpoint cannot be missed, refuses another app's messages (404, or the 409 the contract
gives a prepare reusing another app's id) and changes nothing; every admin endpoint refuses an
app token (401)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.integration.api.helpers import assert_problem
from tests.support import CHECK_PREFIX, Api, AppKeys

VICTIM_PENDING = "victim-pending"
VICTIM_SENT = "victim-sent"
VICTIM_TRANSACTION = "victim-tx"
SECRET_PAYLOAD = "victim-only-data"
PUBLIC = {"/healthz", "/readyz", "/metrics"}


@dataclass(frozen=True)
class Attack:
    """What the attacker sends to one operation and the status the contract demands."""

    status: int
    message_id: str = VICTIM_PENDING
    body: str | None = None  # "prepare", "batch-prepare", "ids" or "transaction"


def _prepare_item(message_id: str) -> dict[str, Any]:
    return {"message_id": message_id, "topic": "attacker.t", "payload": {"steal": True},
            "check_url": CHECK_PREFIX + "c"}


# every app-token operation of the API; the test fails when the document has one more
APP_OPERATIONS: dict[tuple[str, str], Attack] = {
    ("POST", "/v1/messages"): Attack(409, body="prepare"),
    ("POST", "/v1/messages/send"): Attack(409, body="prepare"),
    ("POST", "/v1/messages/batch"): Attack(409, body="batch-prepare"),
    ("POST", "/v1/messages/batch/confirm"): Attack(404, body="ids"),
    ("POST", "/v1/messages/batch/cancel"): Attack(404, body="ids"),
    ("POST", "/v1/messages/{message_id}/confirm"): Attack(404),
    ("POST", "/v1/messages/{message_id}/cancel"): Attack(404),
    ("POST", "/v1/messages/{message_id}/ack"): Attack(404, message_id=VICTIM_SENT),
    ("GET", "/v1/messages/{message_id}"): Attack(404),
    ("GET", "/v1/messages/{message_id}/events"): Attack(404),
    ("POST", "/v1/transactions"): Attack(409, body="transaction"),
    ("POST", "/v1/transactions/{transaction_id}/confirm"): Attack(404),
    ("POST", "/v1/transactions/{transaction_id}/cancel"): Attack(404),
    ("GET", "/v1/transactions/{transaction_id}"): Attack(404),
}


# app-token operations that name no resource: they answer about the caller's own app alone
OWN_APP_OPERATIONS = {("GET", "/v1/apps/me")}


async def _operations(api: Api) -> list[tuple[str, str]]:
    response = await api.client.get("/openapi.json")
    assert response.status_code == 200
    return [(method.upper(), path) for path, item in response.json()["paths"].items()
            for method in item if method in {"get", "post", "put", "patch", "delete"}]


def _json(attack: Attack) -> Any:
    if attack.body == "prepare":
        return _prepare_item(attack.message_id)
    if attack.body == "batch-prepare":
        return {"messages": [_prepare_item("attacker-own"), _prepare_item(attack.message_id)]}
    if attack.body == "ids":
        return {"message_ids": [attack.message_id]}
    if attack.body == "transaction":
        item = {"topic": "attacker.t", "payload": {"steal": True}}
        return {"transaction_id": VICTIM_TRANSACTION, "check_url": CHECK_PREFIX + "c",
                "messages": [item]}
    return None


def _url(path: str, message_id: str) -> str:
    return path.replace("{message_id}", message_id).replace("{transaction_id}",
                                                            VICTIM_TRANSACTION)


async def _victim(api: Api, topic: str) -> tuple[AppKeys, dict[str, Any]]:
    victim = await api.create_app("victim", produce=[topic], consume=[topic])
    for message_id in (VICTIM_PENDING, VICTIM_SENT):
        prepared = await api.prepare(victim, topic, message_id=message_id,
                                     payload={"data": SECRET_PAYLOAD})
        assert prepared.status_code == 201, prepared.text
    assert (await api.post(victim, f"/v1/messages/{VICTIM_SENT}/confirm")).status_code == 200
    created = await api.post(victim, "/v1/transactions", json={
        "transaction_id": VICTIM_TRANSACTION, "check_url": CHECK_PREFIX + "c",
        "messages": [{"topic": topic, "payload": {"data": SECRET_PAYLOAD}}]})
    assert created.status_code == 201, created.text
    return victim, await _snapshot(api, victim)


async def _snapshot(api: Api, victim: AppKeys) -> dict[str, Any]:
    found = {}
    for message_id in (VICTIM_PENDING, VICTIM_SENT):
        message = await api.client.get(f"/v1/messages/{message_id}", headers=victim.headers)
        history = await api.client.get(f"/v1/messages/{message_id}/events",
                                       headers=victim.headers)
        found[message_id] = (message.json(), history.json())
    transaction = await api.client.get(f"/v1/transactions/{VICTIM_TRANSACTION}",
                                       headers=victim.headers)
    found[VICTIM_TRANSACTION] = (transaction.json(), None)
    return found


async def test_attack_table_covers_every_served_app_endpoint(api: Api) -> None:
    operations = [op for op in await _operations(api)
                  if op[1].startswith("/v1/") and not op[1].startswith("/v1/admin/")]
    assert sorted(operations) == sorted([*APP_OPERATIONS, *OWN_APP_OPERATIONS]), (
        "a new app endpoint needs an Attack")


async def test_the_own_app_endpoint_answers_the_callers_app_without_secrets(
        api: Api, topic: str) -> None:
    victim, _ = await _victim(api, topic)
    attacker = await api.create_app("attacker", produce=["attacker.*"], consume=["attacker.*"])
    for keys in (attacker, victim):
        response = await api.client.get("/v1/apps/me", headers=keys.headers)
        assert response.status_code == 200, response.text
        assert response.json()["name"] == keys.name
        assert keys.api_key not in response.text and keys.signing_secret not in response.text
        assert not {"api_key", "signing_secret"} & set(response.json())
    for headers in ({}, {"Authorization": "Bearer " + attacker.api_key[:-1]}, api.admin):
        assert_problem(await api.client.get("/v1/apps/me", headers=headers), 401)


@pytest.mark.parametrize(("method", "path"), sorted(APP_OPERATIONS),
                         ids=[f"{m} {p}" for m, p in sorted(APP_OPERATIONS)])
async def test_app_endpoint_hides_other_apps_messages(api: Api, topic: str, method: str,
                                                      path: str) -> None:
    victim, before = await _victim(api, topic)
    attacker = await api.create_app("attacker", produce=["attacker.*"],
                                    consume=["attacker.*"])
    attack = APP_OPERATIONS[(method, path)]
    url = _url(path, attack.message_id)
    response = await api.client.request(method, url, headers=attacker.headers,
                                        json=_json(attack))
    assert_problem(response, attack.status)
    assert SECRET_PAYLOAD not in response.text
    assert await _snapshot(api, victim) == before
    # nothing of the attacker's was stored either (a batch is all or nothing)
    listed = await api.client.get("/v1/admin/messages", headers=api.admin,
                                  params={"app": "attacker"})
    assert listed.json()["items"] == []


async def test_every_admin_endpoint_refuses_an_app_token(api: Api, topic: str) -> None:
    victim, before = await _victim(api, topic)
    operations = [op for op in await _operations(api) if op[1].startswith("/v1/admin/")]
    assert {("POST", "/v1/admin/apps/{name}/rotate-signing-secret"),
            ("POST", "/v1/admin/dead-letters/resend"),
            ("GET", "/v1/admin/report/summary")} < set(operations)
    failures = []
    for method, path in operations:
        url = _url(path, VICTIM_PENDING).replace("{name}", victim.name)
        body = {"limit": 10} if method == "POST" else None
        for headers in (victim.headers, {}, {"Authorization": "Bearer " + victim.api_key[:-1]}):
            response = await api.client.request(method, url, headers=headers, json=body)
            if response.status_code != 401:
                failures.append((method, path, response.status_code))
            else:
                assert_problem(response, 401)
    assert failures == []
    assert await _snapshot(api, victim) == before
    still = await api.client.get(f"/v1/messages/{VICTIM_PENDING}", headers=victim.headers)
    assert still.status_code == 200  # the victim's key was not rotated by anyone


async def test_public_endpoints_are_only_health_and_metrics(api: Api) -> None:
    """Everything outside /v1 that the document lists needs no token and reveals no data."""
    outside = {path for _, path in await _operations(api) if not path.startswith("/v1/")}
    assert outside == PUBLIC
    for path in PUBLIC:
        response = await api.client.get(path)
        assert response.status_code == 200, (path, response.text)

