"""One check-back call (design section 5): guard the URL again, sign the body with the app's
secret(s), POST it over the worker's pinned keep-alive pool (:mod:`confirm_service.http11`),
and read the answer defensively.

Anything but a 2xx answer of ``{"status": "committed" | "rolled_back" | "unknown"}`` within the
timeout and the size cap is ``unknown``: the caller never raises for what a producer does.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import orjson
import structlog

from confirm_service.http11 import Http11Pool, HttpError, Request, TooLarge
from rms.callback_urls import CallTarget, call_target
from rms.domain.checkback import Outcome
from rms.domain.errors import Invalid
from rms.domain.models import App, Message
from rms.domain.transactions import Transaction
from rms.kafka.records import rfc3339
from rms.usecases.checkback import CheckResult
from rms_client.signing import signed_headers
from rms_client.timestamps import format_rfc3339
from rms_client.trace import TraceContext

log = structlog.get_logger(__name__)

# idle connections are dropped before common servers drop them (uvicorn: 5 s, gunicorn: 2 s)
KEEPALIVE_SECONDS = 1.5
MAX_REMEMBERED_TARGETS = 1024


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


def transaction_callback_body(transaction: Transaction) -> bytes:
    """The contract body of a transaction's check-back: one call for all its messages."""
    return orjson.dumps({
        "transaction_id": transaction.transaction_id, "app": transaction.app,
        "message_ids": list(transaction.message_ids),
        "created_at": format_rfc3339(transaction.created_at),
        "check_count": transaction.check_count,
    })


def transaction_webhook_id(transaction: Transaction) -> str:
    return f"txn_{transaction.transaction_id}_{transaction.check_count}"


@dataclass(frozen=True, slots=True)
class _Call:
    """What one check-back call sends, and how its log lines name it."""

    url: str | None
    body: bytes
    webhook_id: str
    names: dict[str, str | int]
    trace: TraceContext | None = None  # sent as traceparent / tracestate headers


class CheckBackCaller:
    """Shared by every call of a worker process: one connection pool, one timeout policy."""

    def __init__(self, settings: CallerSettings) -> None:
        self._settings = settings
        self._pool = Http11Pool(allow_unpinned=settings.allow_private,
                                keepalive_seconds=KEEPALIVE_SECONDS)
        self._private_targets: dict[tuple[str, tuple[str, ...]], CallTarget] = {}

    async def aclose(self) -> None:
        await self._pool.aclose()

    async def check(self, message: Message, app: App,
                    trace: TraceContext | None) -> CheckResult:
        """Ask the producer about ``message``; never raises for network or producer faults.
        The timeout covers everything, DNS resolution of the guard included. The call carries
        ``trace`` as W3C headers."""
        return await self._check(_Call(
            message.check_url, callback_body(message), webhook_id(message),
            {"message_id": message.message_id, "attempt": message.check_count}, trace), app)

    async def check_transaction(self, transaction: Transaction, app: App,
                                trace: TraceContext | None = None) -> CheckResult:
        """Ask the producer about ``transaction`` (all its messages in one call), as
        :meth:`check`; the call carries ``trace`` as W3C headers."""
        return await self._check(_Call(
            transaction.check_url, transaction_callback_body(transaction),
            transaction_webhook_id(transaction),
            {"transaction_id": transaction.transaction_id,
             "attempt": transaction.check_count}, trace), app)

    async def _check(self, call: _Call, app: App) -> CheckResult:
        try:
            async with asyncio.timeout(self._settings.timeout_seconds):
                return CheckResult(await self._ask(call, app))
        except Refused as exc:
            return CheckResult(Outcome.UNKNOWN, str(exc), called=False)
        except TimeoutError:
            return CheckResult(Outcome.UNKNOWN,
                               f"no answer within {self._settings.timeout_seconds:g}s")
        except (Unanswered, TooLarge) as exc:
            return CheckResult(Outcome.UNKNOWN, str(exc))
        except (HttpError, ValueError) as exc:
            return CheckResult(Outcome.UNKNOWN, f"{type(exc).__name__}: {exc}".rstrip(": "))

    async def _target(self, url: str, prefixes: tuple[str, ...]) -> CallTarget:
        """The guard of :func:`rms.callback_urls.call_target`, run at every call. Without
        private callbacks it resolves and checks the host every time (DNS may answer
        differently now); with them the answer depends only on the URL and the app's current
        prefixes, so it is remembered (a few hundred URLs at most: one per producer
        endpoint)."""
        if not self._settings.allow_private:
            return await call_target(url, prefixes, allow_private=False)
        key = (url, prefixes)
        target = self._private_targets.get(key)
        if target is None:
            target = await call_target(url, prefixes, allow_private=True)
            if len(self._private_targets) >= MAX_REMEMBERED_TARGETS:
                self._private_targets.clear()
            self._private_targets[key] = target
        return target

    async def _ask(self, call: _Call, app: App) -> Outcome:
        url = call.url
        if url is None:
            raise Refused("message has no check_url")
        try:
            target = await self._target(url, app.check_url_prefixes)
        except Invalid as exc:
            raise Refused(f"refused: {exc.detail}") from exc
        secrets = [s for s in (app.signing_secret, app.previous_signing_secret) if s]
        headers = signed_headers(secrets, call.webhook_id, call.body) | {
            "content-type": "application/json"}
        if call.trace is not None:
            headers |= call.trace.headers()
        log.debug("check.calling", **call.names, app=app.name, url=url,
                  address=None if target.address is None else str(target.address))
        reply = await self._pool.post(Request(url, target, call.body, headers,
                                              self._settings.max_response_bytes))
        if 300 <= reply.status < 400:
            raise Unanswered(f"HTTP {reply.status} redirect (never followed)")
        if not 200 <= reply.status < 300:
            raise Unanswered(f"HTTP {reply.status}")
        return parse_answer(reply.body)


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
