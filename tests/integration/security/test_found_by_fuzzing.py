"""Regressions for what schemathesis found: each answered a 5xx, an undocumented status or an
undocumented content type before the fix."""

from __future__ import annotations

from tests.integration.api.helpers import assert_problem, stored
from tests.support import CHECK_PREFIX, Api


async def test_nul_characters_are_422_not_500(api: Api, topic: str) -> None:
    """PostgreSQL cannot store NUL in text or \\u0000 in jsonb (SQLSTATE class 22)."""
    app = await api.create_app("producer")
    valid = {"topic": topic, "payload": 1, "check_url": CHECK_PREFIX + "c"}
    for body in (valid | {"key": "a\x00b"}, valid | {"payload": {"s": "\x00"}},
                 valid | {"headers": {"h": "\x00"}}):
        response = await api.client.post("/v1/messages", json=body, headers=app.headers)
        assert_problem(response, 422, contains="NUL")
    assert await stored(api) == []
    for params in ({"topic": "\x00"}, {"app": "a\x00"}, {"cursor": "\x00"}):
        response = await api.client.get("/v1/admin/messages", params=params,
                                        headers=api.admin)
        assert_problem(response, 422)
    assert_problem(await api.client.get("/v1/admin/apps/a%00b", headers=api.admin), 422)


async def test_body_that_is_not_utf8_is_422(api: Api) -> None:
    app = await api.create_app("producer")
    response = await api.client.post("/v1/messages", content=b"{\"topic\": \"\x80\x81\"}",
                                      headers=app.headers | {"content-type": "application/json"})
    assert_problem(response, 422)


async def test_error_responses_are_documented_as_problem_documents(api: Api) -> None:
    document = (await api.client.get("/openapi.json")).json()
    prepare = document["paths"]["/v1/messages"]["post"]["responses"]
    for code in ("401", "403", "404", "409", "413", "422", "429", "503"):
        assert list(prepare[code]["content"]) == ["application/problem+json"], code
        assert prepare[code]["content"]["application/problem+json"]["schema"] == {
            "$ref": "#/components/schemas/Problem"}
    assert list(prepare["201"]["content"]) == ["application/json"]
    actual = await api.client.post("/v1/messages", json={}, headers=api.admin)
    assert actual.headers["content-type"] == "application/problem+json"


async def test_integer_beyond_64_bits_in_the_payload_is_422(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    body = {"topic": topic, "payload": {"n": 2**64}, "check_url": CHECK_PREFIX + "c"}
    for path in ("/v1/messages", "/v1/messages/send"):
        response = await api.client.post(path, json=body, headers=app.headers)
        assert_problem(response, 422, contains="payload")
    batch = await api.client.post("/v1/messages/batch", json={"messages": [body]},
                                  headers=app.headers)
    assert_problem(batch, 422)
    assert await stored(api) == []
    fits = await api.client.post("/v1/messages", json=body | {"payload": {"n": 2**63 - 1}},
                                 headers=app.headers)
    assert fits.status_code == 201, fits.text
