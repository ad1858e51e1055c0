"""The hot paths (:mod:`message_service.hot_paths`) answer prepare, confirm and cancel exactly
as the framework's routes do: the same requests, sent to an API with them and to one without
them (same database), get the same status, media type and body, refusals included; and the
well-formed ones never reach the framework's router."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from message_service.hot_paths import HotPaths
from rms.config import Settings
from tests.conftest import ADMIN_TOKEN
from tests.support import CHECK_PREFIX, Api, AppKeys

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class RoutedRecorder:
    """Outermost middleware noting, per request, whether the framework's router took it."""

    def __init__(self, app: ASGIApp, seen: list[tuple[str, bool]]) -> None:
        self.app = app
        self.seen = seen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)
        if scope["type"] == "http":
            self.seen.append((scope["path"], "endpoint" in scope))


async def _api(settings: Settings, hot: bool, seen: list[tuple[str, bool]]
               ) -> AsyncIterator[Api]:
    from message_service.app import create_app

    app = create_app(settings)
    if not hot:
        hot_paths: Any = HotPaths
        app.user_middleware = [m for m in app.user_middleware if m.cls is not hot_paths]
    app.add_middleware(RoutedRecorder, seen=seen)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://rms.test") as client:
            yield Api(client, ADMIN_TOKEN, settings)


class Pair:
    """The same requests against the API with hot paths and the one without."""

    def __init__(self, hot: Api, framework: Api, seen: list[tuple[str, bool]]) -> None:
        self.hot, self.framework, self.seen = hot, framework, seen
        self.tag = uuid.uuid4().hex[:8]
        self.keys: dict[str, tuple[AppKeys, AppKeys]] = {}

    async def create_app(self, name: str, produce: list[str]) -> None:
        # consuming nothing: neither app is a subscriber of the other's messages
        self.keys[name] = (
            await self.hot.create_app(f"hot-{self.tag}-{name}", produce, consume=["none"]),
            await self.framework.create_app(f"fw-{self.tag}-{name}", produce, consume=["none"]))

    async def same(self, app: str, path: str, body: Any = None, *,
                   headers: dict[str, str] | None = None, raw: bytes | None = None,
                   token: str | None = None) -> tuple[int, dict[str, Any]]:
        """Send the request to both; assert the answers are the same; return it."""
        answers = []
        for api, keys, side in zip((self.hot, self.framework), self.keys[app], ("h", "f"),
                                   strict=True):
            ids = f"{side}{self.tag}"
            sent = {"Authorization": f"Bearer {token or keys.api_key}"} | (headers or {})
            content = raw if raw is not None else (
                None if body is None else orjson.dumps(body).replace(b"ID", ids.encode()))
            if content is not None and "Content-Type" not in sent:
                sent["Content-Type"] = "application/json"
            response = await api.client.post(path.replace("ID", ids), content=content,
                                             headers=sent)
            answers.append((response.status_code, response.headers.get("content-type"),
                            _normal(response.text, ids, keys.name)))
        assert answers[0] == answers[1]
        return answers[0][0], answers[0][2]


def _normal(text: str, ids: str, app: str) -> dict[str, Any]:
    body: dict[str, Any] = orjson.loads(text.replace(ids, "ID").replace(app, "APP"))
    return {k: (v is not None if k.endswith(("_at", "_after")) else v) for k, v in body.items()}


@pytest.fixture
async def pair(settings: Settings) -> AsyncIterator[Pair]:
    seen: list[tuple[str, bool]] = []
    async for hot in _api(settings, True, seen):
        async for framework in _api(settings, False, []):
            yield Pair(hot, framework, seen)


def _prepare(topic: str, **fields: Any) -> dict[str, Any]:
    return {"message_id": "ID-1", "topic": topic, "payload": {"n": 1},
            "check_url": CHECK_PREFIX + "check"} | fields


async def test_prepare_confirm_cancel_answer_as_the_routes(pair: Pair) -> None:
    await pair.create_app("p", ["t.*"])
    status, body = await pair.same("p", "/v1/messages", _prepare("t.a", key="k"),
                                   headers={"traceparent": TRACEPARENT})
    assert status == 201 and body["state"] == "pending-send" and body["traceparent"]
    assert (await pair.same("p", "/v1/messages", _prepare("t.a", key="k")))[0] == 200
    assert (await pair.same("p", "/v1/messages", _prepare("t.a", key="x")))[0] == 409
    assert (await pair.same("p", "/v1/messages", _prepare("u.a", message_id="ID-2")))[0] == 403
    assert (await pair.same("p", "/v1/messages", _prepare(
        "t.a", message_id="ID-3", check_url="http://elsewhere.test/")))[0] == 422
    assert (await pair.same("p", "/v1/messages/ID-1/confirm"))[0] == 200
    assert (await pair.same("p", "/v1/messages/ID-1/confirm"))[0] == 200
    assert (await pair.same("p", "/v1/messages/ID-1/cancel"))[0] == 409
    assert (await pair.same("p", "/v1/messages/ID-9/confirm"))[0] == 404
    assert (await pair.same("p", "/v1/messages", _prepare("t.a", message_id="ID-4")))[0] == 201
    assert (await pair.same("p", "/v1/messages/ID-4/cancel"))[0] == 200
    hot = [path for path, routed in pair.seen if path.startswith("/v1/messages") and routed]
    assert hot == [], f"the framework's router took well-formed requests: {hot}"


async def test_refusals_are_the_frameworks_own(pair: Pair) -> None:
    await pair.create_app("r", ["t.*"])
    refused = [
        await pair.same("r", "/v1/messages", _prepare("t.a"), token="wrong"),
        await pair.same("r", "/v1/messages", _prepare("t.a"), headers={"Authorization": ""}),
        await pair.same("r", "/v1/messages", {"topic": "t.a"}),
        await pair.same("r", "/v1/messages", _prepare("t.a", extra=1)),
        await pair.same("r", "/v1/messages", raw=b'{"topic": "t.a", "payload": NaN}'),
        await pair.same("r", "/v1/messages", raw=b"{"),
        await pair.same("r", "/v1/messages", raw=b""),
        await pair.same("r", "/v1/messages", _prepare("t.a"),
                        headers={"Content-Type": "text/plain"}),
        await pair.same("r", "/v1/messages/ID-1/confirm", token="wrong"),
        await pair.same("r", "/v1/messages/a b/confirm"),
        await pair.same("r", "/v1/messages/batch/confirm"),
        await pair.same("r", "/v1/messages/ID-1/unknown"),
    ]
    assert [status for status, _ in refused] == [401, 401, 422, 422, 422, 422, 422, 422, 401,
                                                 422, 422, 404]


@pytest.fixture
def limited(settings: Settings) -> Settings:
    return settings.model_copy(update={"app_rate_limit_per_second": 0.001,
                                       "app_rate_limit_burst": 3, "max_pending_per_app": 1})


async def test_rate_limit_and_pending_cap_answer_as_the_routes(limited: Settings) -> None:
    seen: list[tuple[str, bool]] = []
    async for hot in _api(limited, True, seen):
        async for framework in _api(limited, False, []):
            pair = Pair(hot, framework, seen)
            await pair.create_app("l", ["t.*"])
            assert (await pair.same("l", "/v1/messages", _prepare("t.a")))[0] == 201
            status, body = await pair.same("l", "/v1/messages", _prepare("t.a", message_id="ID-2"))
            assert status == 429 and body["pending_cap"] == 1
            assert (await pair.same("l", "/v1/messages/ID-1/cancel"))[0] == 200
            status, body = await pair.same("l", "/v1/messages/ID-1/cancel")
            assert status == 429 and body["retry_after"] >= 1
