"""One check-back call (design section 5): guard the URL again, sign the body with the app's
secret(s), POST it over a shared pinned connection pool, and read the answer defensively.

Anything but a 2xx answer of ``{"status": "committed" | "rolled_back" | "unknown"}`` within the
timeout and the size cap is ``unknown``: the caller never raises for what a producer does.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import StrEnum

import httpx
import orjson

from confirm_service.lanes import Lanes
from confirm_service.pinning import PinnedTransport, pinned
from rms.callback_urls import CallTarget, call_target
from rms.domain.errors import Invalid
from rms.domain.models import App, Message
from rms.kafka.records import rfc3339
from rms.sdk.signing import signed_headers

USER_AGENT = "rms-confirm-service/1"
CONNECTION_LOST = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)
# idle connections are dropped before common servers drop them (uvicorn: 5 s, gunicorn: 2 s)
KEEPALIVE_SECONDS = 1.5


class Outcome(StrEnum):
    COMMITTED = "committed"
    ROLLED_BACK = "rolled_back"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class CheckResult:
    outcome: Outcome
    error: str | None = None
    called: bool = True  # False when the guard refused before any connection


class Unanswered(Exception):
    """The producer's reply does not count as an answer; the text says why."""


class Refused(Exception):
    """The call was not made: the URL failed the guard at call time."""


@dataclass(frozen=True, slots=True)
class CallerSettings:
    timeout_seconds: float
    max_response_bytes: int
    concurrency: int
    allow_private: bool


def callback_body(message: Message) -> bytes:
    """The contract body; ``check_count`` is the number of this call (1 for the first)."""
    return orjson.dumps({
        "message_id": message.message_id, "app": message.app, "topic": message.topic,
        "key": message.key, "headers": message.headers, "created_at": rfc3339(message),
        "check_count": message.check_count,
    })


def webhook_id(message: Message) -> str:
    """Unique per call, so a receiver can refuse replays by id."""
    return f"msg_{message.message_id}_{message.check_count}"


class CheckCaller:
    """Shared by every call of a worker process: one connection pool, one timeout policy."""

    def __init__(self, settings: CallerSettings) -> None:
        self._settings = settings
        one = httpx.Limits(max_connections=1, max_keepalive_connections=1,
                           keepalive_expiry=KEEPALIVE_SECONDS)

        def client() -> httpx.AsyncClient:
            transport = PinnedTransport(allow_unpinned=settings.allow_private, limits=one)
            return httpx.AsyncClient(
                transport=transport, timeout=httpx.Timeout(settings.timeout_seconds),
                follow_redirects=False, trust_env=False,
                # identity: the size cap then bounds what is read, no decompression bomb
                headers={"user-agent": USER_AGENT, "accept-encoding": "identity"})

        self._lanes = Lanes(settings.concurrency, client)

    async def aclose(self) -> None:
        await self._lanes.aclose()

    async def check(self, message: Message, app: App) -> CheckResult:
        """Ask the producer about ``message``; never raises for network or producer faults.
        The timeout covers everything, DNS resolution of the guard included."""
        try:
            async with asyncio.timeout(self._settings.timeout_seconds):
                return CheckResult(await self._ask(message, app))
        except Refused as exc:
            return CheckResult(Outcome.UNKNOWN, str(exc), called=False)
        except TimeoutError:
            return CheckResult(Outcome.UNKNOWN,
                               f"no answer within {self._settings.timeout_seconds:g}s")
        except Unanswered as exc:
            return CheckResult(Outcome.UNKNOWN, str(exc))
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            return CheckResult(Outcome.UNKNOWN, f"{type(exc).__name__}: {exc}".rstrip(": "))

    async def _ask(self, message: Message, app: App) -> Outcome:
        url = message.check_url
        if url is None:
            raise Refused("message has no check_url")
        try:
            target = await call_target(url, app.check_url_prefixes,
                                       allow_private=self._settings.allow_private)
        except Invalid as exc:
            raise Refused(f"refused: {exc.detail}") from exc
        body = callback_body(message)
        secrets = [s for s in (app.signing_secret, app.previous_signing_secret) if s]
        headers = signed_headers(secrets, webhook_id(message), body) | {
            "content-type": "application/json"}
        return await self._post(url, target, body, headers)

    async def _post(self, url: str, target: CallTarget, body: bytes, headers: dict[str, str]
                    ) -> Outcome:
        """One exchange, repeated once if the connection died under it: a keep-alive
        connection the server closed just as we reused it fails that way, and asking again is
        harmless (a check-back is a query; the SDK refuses a true duplicate as a replay)."""
        origin = f"{target.host}:{target.port}:{target.address}"
        async with self._lanes.lane(origin) as client:
            with pinned(target):
                try:
                    return await self._exchange(client, url, body, headers)
                except CONNECTION_LOST:
                    return await self._exchange(client, url, body, headers)

    async def _exchange(self, client: httpx.AsyncClient, url: str, body: bytes,
                        headers: dict[str, str]) -> Outcome:
        async with client.stream("POST", url, content=body, headers=headers) as reply:
            if 300 <= reply.status_code < 400:
                raise Unanswered(f"HTTP {reply.status_code} redirect (never followed)")
            if not reply.is_success:
                raise Unanswered(f"HTTP {reply.status_code}")
            raw = await _read_capped(reply, self._settings.max_response_bytes)
        return parse_answer(raw)


async def _read_capped(reply: httpx.Response, limit: int) -> bytes:
    """The body, refusing (without reading on) anything over ``limit`` bytes."""
    declared = reply.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise Unanswered(f"response of {declared} bytes exceeds the {limit}-byte limit")
    chunks: list[bytes] = []
    size = 0
    async for chunk in reply.aiter_raw():
        size += len(chunk)
        if size > limit:
            raise Unanswered(f"response exceeds the {limit}-byte limit")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_answer(raw: bytes) -> Outcome:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise Unanswered("malformed answer: not JSON") from exc
    status = data.get("status") if isinstance(data, dict) else None
    try:
        return Outcome(str(status))
    except ValueError as exc:
        raise Unanswered(f"malformed answer: status {str(status)[:40]!r} is not one of "
                         "committed, rolled_back, unknown") from exc
