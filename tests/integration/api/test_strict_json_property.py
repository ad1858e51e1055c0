"""Property-based: every JSON body RMS accepts, with any one of its values (or keys) replaced
by something that is not strict JSON (NaN, Infinity, an unpaired surrogate) at any depth, is
answered 422 and stores nothing; never a 5xx."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import CHECK_PREFIX, Api

NOT_STRICT = ["NaN", "Infinity", "-Infinity", '"\\ud800"', '"a\\udfffb"', '"\\udc00\\ud800"']
MARK = "\u0000MARK\u0000"


def _bodies(topic: str) -> dict[str, Any]:
    message = {"topic": topic, "payload": {"n": 1, "list": [1, {"deep": "x"}]}, "key": "k",
               "headers": {"h": "v"}, "check_url": CHECK_PREFIX + "c", "max_checks": 3}
    return {
        "/v1/messages": message,
        "/v1/messages/send": message,
        "/v1/messages/batch": {"messages": [message, message | {"key": "k2"}]},
        "/v1/messages/batch/confirm": {"message_ids": ["a", "b"]},
        "/v1/messages/batch/cancel": {"message_ids": ["a"]},
        "/v1/admin/apps": {"name": "strict", "produce_topics": ["x.*"],
                           "consume_topics": ["y"], "check_url_prefixes": [CHECK_PREFIX]},
        "/v1/admin/dead-letters/resend": {"topic": topic, "limit": 5, "dry_run": True},
        "/v1/admin/apps/producer/rotate-signing-secret": {"overlap_seconds": 60},
    }


def _places(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], bool]]:
    """Every value position and every key position (``True``) in ``value``."""
    found: list[tuple[tuple[Any, ...], bool]] = [(path, False)]
    if isinstance(value, dict):
        for key, item in value.items():
            found.append(((*path, key), True))
            found += _places(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _places(item, (*path, index))
    return found


def _inject(body: Any, path: tuple[Any, ...], as_key: bool, token: str) -> bytes:
    """``body`` as JSON text with the value (or key) at ``path`` replaced by ``token``."""
    if not path:
        return token.encode()
    target = body = json.loads(json.dumps(body))
    for step in path[:-1]:
        target = target[step]
    if as_key:
        target[MARK] = target.pop(path[-1])
        return json.dumps(body).replace(json.dumps(MARK), token).encode()
    target[path[-1]] = MARK
    return json.dumps(body).replace(json.dumps(MARK), token).encode()


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
async def test_no_json_body_that_is_not_strict_json_is_accepted(api: Api, topic: str,
                                                                data: st.DataObject) -> None:
    if "producer" not in api.apps:
        await api.create_app("producer")
    bodies = _bodies(topic)
    path = data.draw(st.sampled_from(sorted(bodies)))
    place, as_key = data.draw(st.sampled_from(_places(bodies[path])))
    if as_key and not place:
        return
    token = data.draw(st.sampled_from(NOT_STRICT if not as_key else NOT_STRICT[3:]))
    raw = _inject(bodies[path], place, as_key, token)
    token_headers = api.admin if path.startswith("/v1/admin/") else api.apps["producer"].headers
    response = await api.client.post(path, content=raw,
                                     headers=token_headers | {"content-type": "application/json"})
    assert response.status_code == 422, (path, raw, response.status_code, response.text)
    assert "invalid JSON" in response.json()["detail"]
    stored = await api.client.get("/v1/admin/messages", headers=api.admin)
    assert stored.json()["items"] == []
