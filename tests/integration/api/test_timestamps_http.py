"""``deliver_after`` is read as RFC 3339 exactly, with a 422 naming the reason, and every
timestamp of every answer is RFC 3339 in UTC with ``Z`` (design section 4)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from tests.integration.api.helpers import assert_problem, stored
from tests.support import CHECK_PREFIX, Api

RFC3339_Z = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z")
TIMESTAMP_FIELDS = {"created_at", "confirmed_at", "done_at", "deleted_at", "next_check_at",
                    "next_delivery_at", "deliver_after", "cancelled_at", "at", "key_rotated_at",
                    "previous_signing_secret_expires_at"}


def _in_an_hour_at_plus_five() -> str:
    moment = datetime.now(UTC) + timedelta(hours=1)
    return moment.astimezone(timezone(timedelta(hours=5))).isoformat()


def _timestamps(body: Any) -> list[str]:
    """Every value of a timestamp field anywhere in ``body``."""
    if isinstance(body, list):
        return [found for item in body for found in _timestamps(item)]
    if not isinstance(body, dict):
        return []
    found = [v for k, v in body.items() if k in TIMESTAMP_FIELDS and v is not None]
    return found + [f for v in body.values() for f in _timestamps(v)]


ACCEPTED = [
    ("2016-12-31t23:59:60z", "2017-01-01T00:00:00Z"),
    ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z"),
    ("0001-01-01T00:30:00-01:00", "0001-01-01T01:30:00Z"),
    ("2026-11-26T09:00:00.5+01:00", "2026-11-26T08:00:00.500000Z"),
]
REFUSED = [
    ("20261126T080000Z", "not an RFC 3339 timestamp"),
    ("2026-W48-4T08:00Z", "not an RFC 3339 timestamp"),
    ("2026-11-26T08Z", "not an RFC 3339 timestamp"),
    ("2026-11-26T08:00:00", "not an RFC 3339 timestamp"),
    ("0001-01-01T00:30:00+01:00", "outside the years 0001-9999"),
    ("2026-11-26T08:00:60Z", "leap second"),
    ("2026-02-30T08:00:00Z", "not a valid date"),
]


async def test_rfc3339_deliver_after_is_stored_and_answered_in_utc(api: Api,
                                                                   topic: str) -> None:
    app = await api.create_app("producer")
    for written, answered in ACCEPTED:
        response = await api.prepare(app, topic, deliver_after=written)
        assert response.status_code == 201, response.text
        assert response.json()["deliver_after"] == answered, written
        again = await api.client.get(f"/v1/messages/{response.json()['message_id']}",
                                     headers=app.headers)
        assert again.json()["deliver_after"] == answered, written


async def test_other_forms_are_422_with_the_reason(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    for written, reason in REFUSED:
        for path in ("/v1/messages", "/v1/messages/send"):
            body = {"topic": topic, "payload": 1, "check_url": CHECK_PREFIX + "c",
                    "deliver_after": written}
            problem = assert_problem(await api.post(app, path, json=body), 422,
                                     contains=reason)
            assert "NUL" not in problem["detail"]
        transaction = await api.post(app, "/v1/transactions", json={
            "check_url": CHECK_PREFIX + "c",
            "messages": [{"topic": topic, "payload": 1, "deliver_after": written}]})
        assert_problem(transaction, 422, contains=reason)
    assert await stored(api) == []


async def test_every_answer_writes_timestamps_in_utc_with_z(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    message_id = await api.prepared_id(app, topic, deliver_after="0001-01-01T00:00:00Z")
    await api.post(app, f"/v1/messages/{message_id}/cancel")
    transaction = await api.post(app, "/v1/transactions", json={
        "check_url": CHECK_PREFIX + "c",
        "messages": [{"topic": topic, "payload": 1, "deliver_after": _in_an_hour_at_plus_five()}]})
    assert transaction.status_code == 201, transaction.text
    answers = [
        transaction,
        await api.client.get(f"/v1/messages/{message_id}", headers=app.headers),
        await api.client.get(f"/v1/messages/{message_id}/events", headers=app.headers),
        await api.client.get("/v1/admin/messages", headers=api.admin),
        await api.client.get(f"/v1/admin/messages/{message_id}/events", headers=api.admin),
        await api.client.get("/v1/admin/apps", headers=api.admin),
        await api.client.post(f"/v1/admin/apps/{app.name}/rotate-key",
                              json={"rotate_signing_secret": True}, headers=api.admin),
        await api.client.get(f"/v1/admin/apps/{app.name}", headers=api.admin),
    ]
    seen = 0
    for answer in answers:
        assert answer.status_code in (200, 201), answer.text
        for value in _timestamps(answer.json()):
            assert RFC3339_Z.fullmatch(value), (answer.url, value)
            seen += 1
    assert seen >= 12
