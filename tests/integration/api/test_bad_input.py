"""Bad input to POST /v1/messages and friends: the documented status, a problem document,
nothing stored, never a 500 (design section 4)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx

from tests.integration.api.conftest import SMALL_PAYLOAD_BYTES
from tests.integration.api.helpers import assert_problem, stored
from tests.support import CHECK_PREFIX, Api

MESSAGES = "/v1/messages"


def _valid(topic: str, **fields: Any) -> dict[str, Any]:
    return {"topic": topic, "payload": {"n": 1}, "check_url": CHECK_PREFIX + "check"} | fields


async def _expect(api: Api, response: httpx.Response, status: int, contains: str = "") -> None:
    assert response.status_code < 500, response.text
    assert_problem(response, status, contains=contains)
    assert await stored(api) == []


async def test_malformed_and_mistyped_bodies_are_422(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    raw_bodies = [b"{not json", b"", b"[1, 2", b"null", b"[]", b'"just a string"']
    for raw in raw_bodies:
        response = await api.client.post(
            MESSAGES, content=raw,
            headers=app.headers | {"content-type": "application/json"})
        await _expect(api, response, 422)

    valid = _valid(topic)
    bodies: list[dict[str, Any]] = [
        {k: v for k, v in valid.items() if k != "topic"},
        {k: v for k, v in valid.items() if k != "payload"},
        valid | {"max_checks": "5"},
        valid | {"max_checks": 0},
        valid | {"max_deliveries": 1.5},
        valid | {"check_after_seconds": -1},
        valid | {"ack_timeout_seconds": 0},
        valid | {"headers": {"a": 1}},
        valid | {"headers": ["a"]},
        valid | {"key": 7},
        valid | {"topic": 7},
        valid | {"unknown": "field"},
        valid | {"message_id": "has space"},
        valid | {"message_id": "x" * 129},
        valid | {"message_id": ""},
        valid | {"message_id": "slash/inside"},
        valid | {"message_id": 12},
        valid | {"topic": "bad topic!"},
        valid | {"topic": ""},
        valid | {"topic": "t" * 250},
    ]
    for body in bodies:
        await _expect(api, await api.client.post(MESSAGES, json=body, headers=app.headers), 422)
        for path in ("/v1/messages/send",):
            await _expect(api, await api.client.post(path, json=body, headers=app.headers),
                          422)


async def test_dot_topics_are_invalid(api: Api) -> None:
    """Kafka refuses the topic names "." and ".." (rms.domain.topics.is_valid_topic)."""
    app = await api.create_app("producer")
    for name in (".", ".."):
        response = await api.client.post(MESSAGES, json=_valid(name), headers=app.headers)
        await _expect(api, response, 422)


async def test_topic_not_in_produce_topics_is_403(api: Api, unique: str) -> None:
    app = await api.create_app("producer", produce=[f"orders.{unique}.*"])
    for topic in (f"payments.{unique}", f"orders.{unique}", f"xorders.{unique}.a"):
        response = await api.client.post(MESSAGES, json=_valid(topic), headers=app.headers)
        await _expect(api, response, 403, contains=topic)
        response = await api.client.post("/v1/messages/send", json=_valid(topic),
                                         headers=app.headers)
        await _expect(api, response, 403)
    allowed = await api.client.post(MESSAGES, json=_valid(f"orders.{unique}.a"),
                                    headers=app.headers)
    assert allowed.status_code == 201, allowed.text


async def test_payload_over_the_limit_is_413(small_api: Api, topic: str) -> None:
    api = small_api
    app = await api.create_app("producer")
    just_fits = {"s": "x" * (SMALL_PAYLOAD_BYTES - 8)}  # {"s":"..."} is 8 bytes of framing
    too_big = {"s": "x" * (SMALL_PAYLOAD_BYTES - 7)}
    await _expect(api, await api.client.post(MESSAGES, json=_valid(topic, payload=too_big),
                                             headers=app.headers), 413,
                  contains="RMS_MAX_PAYLOAD_BYTES")
    await _expect(api, await api.client.post("/v1/messages/send",
                                             json=_valid(topic, payload=too_big),
                                             headers=app.headers), 413)
    # the request body limit (payload limit + overhead) answers before the body is parsed
    huge = _valid(topic, payload="y" * (SMALL_PAYLOAD_BYTES + 70 * 1024))
    await _expect(api, await api.client.post(MESSAGES, json=huge, headers=app.headers), 413)
    ok = await api.client.post(MESSAGES, json=_valid(topic, payload=just_fits),
                               headers=app.headers)
    assert ok.status_code == 201, ok.text


async def _chunks(data: bytes, size: int = 4096) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start:start + size]


async def test_chunked_body_over_the_request_limit_is_413(small_api: Api, topic: str) -> None:
    """A body without Content-Length is counted as it streams (body_limit.py)."""
    api = small_api
    app = await api.create_app("producer")
    huge = httpx.Request("POST", "http://rms.test", json=_valid(
        topic, payload="y" * (SMALL_PAYLOAD_BYTES + 70 * 1024))).content
    response = await api.client.post(
        MESSAGES, content=_chunks(huge),
        headers=app.headers | {"content-type": "application/json"})
    assert "content-length" not in {k.lower() for k in response.request.headers}
    await _expect(api, response, 413)


async def test_header_rules_are_422(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    too_many = {f"h{i}": "v" for i in range(api.settings.max_headers + 1)}
    await _expect(api, await api.client.post(MESSAGES, json=_valid(topic, headers=too_many),
                                             headers=app.headers), 422)
    for name in ("rms-delivery", "RMS-Message-Id", "rms-anything", ""):
        response = await api.client.post(MESSAGES, json=_valid(topic, headers={name: "x"}),
                                         headers=app.headers)
        await _expect(api, response, 422)
    big = {"h": "v" * (api.settings.max_header_bytes + 1)}
    await _expect(api, await api.client.post(MESSAGES, json=_valid(topic, headers=big),
                                             headers=app.headers), 422)
    exactly = {f"h{i}": "v" for i in range(api.settings.max_headers)}
    ok = await api.client.post(MESSAGES, json=_valid(topic, headers=exactly),
                               headers=app.headers)
    assert ok.status_code == 201, ok.text


async def test_check_url_rules_are_422(api: Api, topic: str) -> None:
    app = await api.create_app("producer", prefixes=["http://127.0.0.1:1/hooks/"])
    no_url = {"topic": topic, "payload": 1}
    await _expect(api, await api.client.post(MESSAGES, json=no_url, headers=app.headers), 422,
                  contains="check_url")
    for url in (
        "http://127.0.0.1:1/other/check",  # not under the prefix path
        "http://127.0.0.1:2/hooks/check",  # other port
        "https://127.0.0.1:1/hooks/check",  # other scheme
        "http://127.0.0.1:1.evil.example/hooks/check",
        "ftp://127.0.0.1:1/hooks/check",
        "http://user:pw@127.0.0.1:1/hooks/check",
        "http://user@127.0.0.1:1/hooks/check",
        "http:///hooks/check",
        "http://127.0.0.1:99999/hooks/check",
        "not a url",
        "",
        "http://127.0.0.1:1/hooks/" + "a" * 2100,
        "http://127.0.0.1:1/hooks/../admin",  # dot segments climbing out of the prefix
        "http://127.0.0.1:1/hooks/%2e%2E/admin",
        "http://127.0.0.1:1/hooks/.%2e/admin",
        "http://127.0.0.1:1/hooks/x/../../admin",
        "http://127.0.0.1:1/hooks/..%2fadmin",  # an encoded slash
        "http://127.0.0.1:1/hooks\\..\\admin",
        "http://127.0.0.1:1/hooks/check\r\nX-Injected: 1",
        "http://127.0.0.1:1/hooks/check\n",
        "http://127.0.0.1:1/hooks/ch eck",
    ):
        response = await api.client.post(MESSAGES, json=_valid(topic, check_url=url),
                                         headers=app.headers)
        await _expect(api, response, 422)
    ok = await api.client.post(MESSAGES, json=_valid(topic, check_url="http://127.0.0.1:1/hooks/x"),
                               headers=app.headers)
    assert ok.status_code == 201, ok.text
    # stored (and later called) in its one normalised spelling
    spelled = "HTTP://127.0.0.1:1/hooks/a/./b/../%63heck#fragment"
    ok = await api.client.post(MESSAGES, json=_valid(topic, check_url=spelled),
                               headers=app.headers)
    assert ok.status_code == 201, ok.text
    assert ok.json()["check_url"] == "http://127.0.0.1:1/hooks/a/check"


async def test_unknown_ids_are_404_and_invalid_path_ids_422(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    calls = [("POST", "confirm"), ("POST", "cancel"), ("POST", "ack"), ("GET", ""),
             ("GET", "events")]
    for method, action in calls:
        suffix = f"/{action}" if action else ""
        response = await api.client.request(method, f"/v1/messages/nope{suffix}",
                                            headers=app.headers)
        await _expect(api, response, 404, contains="nope")
        for bad in ("has%20space", "x" * 129, "bad!id"):
            response = await api.client.request(method, f"/v1/messages/{bad}{suffix}",
                                                headers=app.headers)
            await _expect(api, response, 422)
    for method, action in [("POST", "confirm"), ("POST", "cancel"), ("POST", "resend"),
                           ("GET", ""), ("GET", "events")]:
        suffix = f"/{action}" if action else ""
        response = await api.client.request(method, f"/v1/admin/messages/nope{suffix}",
                                            headers=api.admin)
        await _expect(api, response, 404)
        response = await api.client.request(method, f"/v1/admin/messages/bad!id{suffix}",
                                            headers=api.admin)
        await _expect(api, response, 422)


async def test_bad_batch_bodies_are_rejected_without_a_500(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    for path, body in [
        ("/v1/messages/batch", {"messages": []}),
        ("/v1/messages/batch", {"messages": "x"}),
        ("/v1/messages/batch", {"messages": [{"topic": topic}]}),
        ("/v1/messages/batch", {}),
        ("/v1/messages/batch/confirm", {"message_ids": []}),
        ("/v1/messages/batch/confirm", {"message_ids": ["bad id"]}),
        ("/v1/messages/batch/cancel", {"message_ids": [1]}),
        ("/v1/messages/batch/cancel", {"ids": ["a"]}),
    ]:
        response = await api.client.post(path, json=body, headers=app.headers)
        await _expect(api, response, 422)


NOT_STRICT_JSON = [
    b'{"topic": "%(t)s", "payload": {"n": NaN}}',
    b'{"topic": "%(t)s", "payload": {"n": Infinity}}',
    b'{"topic": "%(t)s", "payload": [1, -Infinity]}',
    b'{"topic": "%(t)s", "payload": {"s": "\\ud800"}}',
    b'{"topic": "%(t)s", "payload": {"\\udc00": 1}}',
    b'{"topic": "%(t)s", "payload": 1, "headers": {"\\ud83d": "v"}}',
    b'{"topic": "%(t)s", "payload": 1, "headers": {"h": "\\udfff"}}',
    b'{"topic": "%(t)s", "payload": 1, "key": "\\ud800x"}',
    b'{"topic": "%(t)s\\ud800", "payload": 1}',
    b'{"topic": "%(t)s", "payload": 1, "message_id": "a\\ud800"}',
    b'{"topic": "%(t)s", "payload": "\\xed\\xa0\\x80"}',  # a surrogate encoded as UTF-8
]


async def test_bodies_that_are_not_strict_json_are_422_and_store_nothing(api: Api,
                                                                        topic: str) -> None:
    """NaN and Infinity are not JSON numbers (they would be stored as null); an unpaired
    surrogate cannot be encoded as UTF-8. Every JSON body is parsed strictly."""
    app = await api.create_app("producer")
    headers = app.headers | {"content-type": "application/json"}
    for template in NOT_STRICT_JSON:
        raw = template.replace(b"%(t)s", topic.encode())
        for path in (MESSAGES, "/v1/messages/send"):
            response = await api.client.post(path, content=raw, headers=headers)
            await _expect(api, response, 422, contains="invalid JSON")
        batch = b'{"messages": [' + raw + b"]}"
        response = await api.client.post(MESSAGES + "/batch", content=batch, headers=headers)
        await _expect(api, response, 422, contains="invalid JSON")
    admin = api.admin | {"content-type": "application/json"}
    response = await api.client.post("/v1/admin/apps", headers=admin,
                                     content=b'{"name": "x\\ud800", "produce_topics": []}')
    assert_problem(response, 422, contains="invalid JSON")
    good = _valid(topic, payload={"emoji": "\U0001f600", "big": 1.5e300, "neg": -0.0})
    response = await api.client.post(MESSAGES, json=good, headers=app.headers)
    assert response.status_code == 201, response.text
    assert response.json()["payload"] == good["payload"]


async def test_dot_segment_message_ids_are_refused(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    for message_id in (".", ".."):
        response = await api.client.post(MESSAGES, json=_valid(topic, message_id=message_id),
                                         headers=app.headers)
        await _expect(api, response, 422, contains="path segment")
    for message_id in ("...", ".a", "a..b"):  # ordinary path segments: addressable
        response = await api.client.post(MESSAGES, json=_valid(topic, message_id=message_id),
                                         headers=app.headers)
        assert response.status_code == 201, response.text
