"""Assertions shared by the HTTP API contract tests."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support import Api

PROBLEM_TYPE = "application/problem+json"


def assert_problem(response: httpx.Response, status: int, *, contains: str = "") -> dict[str, Any]:
    """``response`` is an RFC 9457 problem document with ``status``; returns its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM_TYPE), response.headers
    body: dict[str, Any] = response.json()
    for field in ("type", "title", "status", "detail"):
        assert field in body, body
    assert body["status"] == status
    assert isinstance(body["detail"], str) and body["detail"]
    assert "Traceback" not in response.text
    if contains:
        assert contains in body["detail"], body
    return body


async def stored(api: Api, **params: Any) -> list[dict[str, Any]]:
    """Every stored message (admin listing), oldest first."""
    response = await api.client.get("/v1/admin/messages", headers=api.admin,
                                    params={"limit": 1000, **params})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def events(api: Api, message_id: str) -> list[dict[str, Any]]:
    response = await api.client.get(f"/v1/admin/messages/{message_id}/events",
                                    headers=api.admin)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["events"]
    return found


async def state_of(api: Api, message_id: str) -> str:
    response = await api.client.get(f"/v1/admin/messages/{message_id}", headers=api.admin)
    assert response.status_code == 200, response.text
    return str(response.json()["state"])
