"""The client's check-back endpoint, as a FastAPI router and as a plain ASGI app: accepts RMS's
signed calls, refuses everything else."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import orjson
import pytest
from fastapi import FastAPI

from rms.domain.secrets import new_signing_secret
from rms_client.checkback import (
    CheckRequest,
    CheckStatus,
    Resolver,
    TransactionCheckRequest,
    TransactionResolver,
    checkback_app,
)
from rms_client.checkback_fastapi import checkback_router
from rms_client.signing import signed_headers

SECRET = new_signing_secret()
OLD_SECRET = new_signing_secret()
BODY = orjson.dumps({"message_id": "order-1-paid", "app": "orders", "topic": "orders.paid",
                     "key": None, "headers": {}, "created_at": "2026-01-01T00:00:00Z",
                     "check_count": 1})


class Recorder:
    def __init__(self) -> None:
        self.seen: list[CheckRequest] = []
        self.answer: CheckStatus = "committed"

    async def resolve(self, check: CheckRequest) -> CheckStatus:
        self.seen.append(check)
        if check.message_id == "explodes":
            raise RuntimeError("database down")
        return self.answer


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def endpoint(form: str, resolve: Resolver, secrets: Sequence[str],
             resolve_transaction: TransactionResolver | None = None) -> Any:
    """An ASGI application serving the check-back at /rms/check, in either form."""
    if form == "asgi":
        return checkback_app(resolve, secrets=secrets, resolve_transaction=resolve_transaction)
    app = FastAPI()
    app.include_router(checkback_router(resolve, secrets=secrets,
                                        resolve_transaction=resolve_transaction))
    return app


@pytest.fixture(params=["fastapi", "asgi"])
def form(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def client(recorder: Recorder, form: str) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=endpoint(form, recorder.resolve, [SECRET, OLD_SECRET]))
    async with httpx.AsyncClient(transport=transport, base_url="http://producer") as http:
        yield http


def signed(secrets: list[str], webhook_id: str, body: bytes = BODY,
           timestamp: int | None = None) -> dict[str, str]:
    return signed_headers(secrets, webhook_id, body, timestamp) | {
        "content-type": "application/json"}


async def test_accepts_a_correct_signature(client: httpx.AsyncClient, recorder: Recorder) -> None:
    response = await client.post("/rms/check", content=BODY, headers=signed([SECRET], "msg_a"))
    assert (response.status_code, response.json()) == (200, {"status": "committed"})
    [check] = recorder.seen
    assert (check.message_id, check.check_count, check.topic) == ("order-1-paid", 1,
                                                                  "orders.paid")


async def test_accepts_either_secret_during_a_rotation(client: httpx.AsyncClient,
                                                       recorder: Recorder) -> None:
    recorder.answer = "rolled_back"
    for n, secrets in enumerate(([OLD_SECRET], [SECRET, OLD_SECRET])):
        response = await client.post("/rms/check", content=BODY,
                                     headers=signed(secrets, f"msg_r{n}"))
        assert response.json() == {"status": "rolled_back"}


async def test_rejects_a_wrong_secret(client: httpx.AsyncClient, recorder: Recorder) -> None:
    response = await client.post("/rms/check", content=BODY,
                                 headers=signed([new_signing_secret()], "msg_b"))
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"
    assert "no webhook-signature matches" in response.json()["detail"]
    assert recorder.seen == []


async def test_rejects_a_stale_timestamp(client: httpx.AsyncClient, recorder: Recorder) -> None:
    stale = int(time.time()) - 301
    response = await client.post("/rms/check", content=BODY,
                                 headers=signed([SECRET], "msg_c", timestamp=stale))
    assert response.status_code == 401
    assert "tolerance" in response.json()["detail"]
    assert recorder.seen == []


async def test_rejects_a_replay(client: httpx.AsyncClient, recorder: Recorder) -> None:
    headers = signed([SECRET], "msg_d")
    first = await client.post("/rms/check", content=BODY, headers=headers)
    again = await client.post("/rms/check", content=BODY, headers=headers)
    assert first.status_code == 200
    assert again.status_code == 409
    assert "already used" in again.json()["detail"]
    assert len(recorder.seen) == 1


async def test_rejects_a_tampered_body_and_missing_headers(client: httpx.AsyncClient) -> None:
    tampered = BODY.replace(b"order-1-paid", b"order-2-paid")
    response = await client.post("/rms/check", content=tampered, headers=signed([SECRET], "m_e"))
    assert response.status_code == 401
    assert (await client.post("/rms/check", content=BODY)).status_code == 401


async def test_signed_but_malformed_body_is_422(client: httpx.AsyncClient) -> None:
    body = b'{"message_id": 1}'
    response = await client.post("/rms/check", content=body,
                                 headers=signed([SECRET], "msg_f", body))
    assert response.status_code == 422


async def test_a_failing_resolver_answers_unknown(client: httpx.AsyncClient) -> None:
    body = BODY.replace(b"order-1-paid", b"explodes")
    response = await client.post("/rms/check", content=body,
                                 headers=signed([SECRET], "msg_g", body))
    assert (response.status_code, response.json()) == (200, {"status": "unknown"})


TRANSACTION_BODY = orjson.dumps({"transaction_id": "order-1", "app": "orders",
                                 "message_ids": ["order-1-paid", "order-1-invoiced"],
                                 "created_at": "2026-01-01T00:00:00Z", "check_count": 2})


async def test_a_transaction_check_goes_to_the_transaction_resolver(form: str) -> None:
    seen: list[TransactionCheckRequest] = []

    async def resolve_transaction(check: TransactionCheckRequest) -> CheckStatus:
        seen.append(check)
        return "rolled_back"

    recorder = Recorder()
    app = endpoint(form, recorder.resolve, [SECRET], resolve_transaction)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://producer") as http:
        response = await http.post("/rms/check", content=TRANSACTION_BODY,
                                   headers=signed([SECRET], "txn_a", TRANSACTION_BODY))
        assert (response.status_code, response.json()) == (200, {"status": "rolled_back"})
        [check] = seen
        assert (check.transaction_id, check.message_ids, check.check_count) == (
            "order-1", ["order-1-paid", "order-1-invoiced"], 2)
        assert recorder.seen == []
        malformed = b'{"transaction_id": "order-2", "message_ids": "x"}'
        response = await http.post("/rms/check", content=malformed,
                                   headers=signed([SECRET], "txn_b", malformed))
        assert response.status_code == 422


async def test_a_transaction_check_without_a_transaction_resolver_is_unknown(
        client: httpx.AsyncClient, recorder: Recorder) -> None:
    response = await client.post("/rms/check", content=TRANSACTION_BODY,
                                 headers=signed([SECRET], "txn_c", TRANSACTION_BODY))
    assert (response.status_code, response.json()) == (200, {"status": "unknown"})
    assert recorder.seen == []


async def test_the_asgi_app_answers_only_post() -> None:
    app = checkback_app(Recorder().resolve, secrets=[SECRET])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://producer") as http:
        response = await http.get("/rms/check")
    assert response.status_code == 405
    assert response.headers["content-type"] == "application/problem+json"
