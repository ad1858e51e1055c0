"""The producer's check-back endpoint (design section 5): an ASGI app, or a FastAPI router.

RMS calls ``POST <check_url>`` when a message (or a transaction of several messages) stayed
pending; the endpoint proves the call
is RMS's (Standard Webhooks signature over the raw body, timestamp within tolerance, each
``webhook-id`` used once), hands the request to the producer's ``resolve`` function and answers
``{"status": "committed" | "rolled_back" | "unknown"}``. A resolver that raises answers
``unknown`` (RMS asks again later) rather than an error page.

Usage, in any ASGI server or framework (:func:`checkback_app` needs no web framework)::

    barrier = Barrier(engine)
    endpoint = checkback_app(barrier.resolve, secrets=[signing_secret],
                             resolve_transaction=barrier.resolve_transaction)
    # uvicorn.run(endpoint), or starlette_app.mount("/rms/check", endpoint)

or, in a FastAPI application (the ``fastapi`` extra, :mod:`rms_client.checkback_fastapi`)::

    app.include_router(checkback_router(barrier.resolve, secrets=[signing_secret],
                                        resolve_transaction=barrier.resolve_transaction))

During a signing-secret rotation pass both secrets: calls signed with either are accepted.
Replays are remembered in memory by default; several replicas behind a load balancer should
pass a shared :class:`ReplayGuard`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import orjson
import structlog
from pydantic import BaseModel, ConfigDict, ValidationError

from rms_client.signing import DEFAULT_TOLERANCE_SECONDS, SignatureError, Verifier

log = structlog.get_logger(__name__)
CheckStatus = Literal["committed", "rolled_back", "unknown"]
DEFAULT_PATH = "/rms/check"


class CheckRequest(BaseModel):
    """The body RMS sends. Unknown fields are ignored: the contract may add optional ones."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    message_id: str
    app: str
    topic: str
    key: str | None = None
    headers: dict[str, str] = {}
    created_at: str
    check_count: int


class TransactionCheckRequest(BaseModel):
    """The body RMS sends about a transaction of several messages: one call for all of them
    (``message_ids`` in the transaction's order)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    transaction_id: str
    app: str
    message_ids: list[str]
    created_at: str
    check_count: int


Resolver = Callable[[CheckRequest], Awaitable[CheckStatus]]
TransactionResolver = Callable[[TransactionCheckRequest], Awaitable[CheckStatus]]


class ReplayGuard(Protocol):
    async def first_use(self, webhook_id: str, remember_until: float) -> bool:
        """True the first time ``webhook_id`` is seen; remember it until ``remember_until``."""
        ...


class MemoryReplayGuard:
    """Ids seen within the tolerance window, in this process. An id older than the window is
    refused by its timestamp anyway, so forgetting it then is safe."""

    def __init__(self) -> None:
        self._seen: dict[str, float] = {}
        self._next_prune = 0.0

    async def first_use(self, webhook_id: str, remember_until: float) -> bool:
        now = time.time()
        if now >= self._next_prune:
            self._seen = {k: until for k, until in self._seen.items() if until > now}
            self._next_prune = now + 10.0
        if webhook_id in self._seen:
            return False
        self._seen[webhook_id] = remember_until
        return True


@dataclass(frozen=True, slots=True)
class CheckBackResponse:
    """The endpoint's HTTP answer."""

    status: int
    media_type: str
    body: bytes


class CheckBackEndpoint:
    """The check-back endpoint without a web framework: headers and raw body in, answer out."""

    def __init__(self, resolve: Resolver, *, secrets: Sequence[str],
                 tolerance_seconds: float = DEFAULT_TOLERANCE_SECONDS,
                 replay_guard: ReplayGuard | None = None,
                 resolve_transaction: TransactionResolver | None = None) -> None:
        self._verifier = Verifier(secrets, tolerance_seconds)
        self._tolerance = tolerance_seconds
        self._guard = replay_guard or MemoryReplayGuard()
        self._resolve = resolve
        self._resolve_transaction = resolve_transaction

    async def answer(self, headers: Mapping[str, str], body: bytes) -> CheckBackResponse:
        """The answer to ``POST`` with these headers and this body."""
        try:
            verified = self._verifier.verify(headers, body)
        except SignatureError as exc:
            return _problem(401, "Invalid signature", str(exc))
        if not await self._guard.first_use(verified.webhook_id,
                                           verified.timestamp + 2 * self._tolerance):
            return _problem(409, "Replayed request", f"webhook-id {verified.webhook_id!r} "
                            "was already used")
        try:
            if _about_transaction(body):
                transaction = TransactionCheckRequest.model_validate_json(body)
                return _answer(await _resolve_transaction(self._resolve_transaction,
                                                          transaction))
            check = CheckRequest.model_validate_json(body)
        except ValidationError as exc:
            return _problem(422, "Not a check-back request", str(exc).splitlines()[0])
        return _answer(await _resolve(self._resolve, check))


Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class CheckBackApp:
    """The endpoint as an ASGI application: ``POST`` at any path it is served or mounted on."""

    def __init__(self, endpoint: CheckBackEndpoint) -> None:
        self._endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if scope["method"] != "POST":
            response = _problem(405, "Method not allowed", "check-backs are POST requests")
        else:
            headers = {name.decode("latin-1"): value.decode("latin-1")
                       for name, value in scope["headers"]}
            response = await self._endpoint.answer(headers, await _body(receive))
        await send({"type": "http.response.start", "status": response.status,
                    "headers": [(b"content-type", response.media_type.encode())]})
        await send({"type": "http.response.body", "body": response.body})


def checkback_app(resolve: Resolver, *, secrets: Sequence[str],
                  tolerance_seconds: float = DEFAULT_TOLERANCE_SECONDS,
                  replay_guard: ReplayGuard | None = None,
                  resolve_transaction: TransactionResolver | None = None) -> CheckBackApp:
    """An ASGI app answering RMS check-backs with ``resolve`` (a message) or
    ``resolve_transaction`` (a transaction of several messages; without it such a call
    answers ``unknown``)."""
    return CheckBackApp(CheckBackEndpoint(resolve, secrets=secrets,
                                          tolerance_seconds=tolerance_seconds,
                                          replay_guard=replay_guard,
                                          resolve_transaction=resolve_transaction))


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def _about_transaction(body: bytes) -> bool:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    return isinstance(data, dict) and "transaction_id" in data


async def _resolve_transaction(resolve: TransactionResolver | None,
                               check: TransactionCheckRequest) -> CheckStatus:
    if resolve is None:
        log.warning("checkback.no_transaction_resolver", transaction_id=check.transaction_id)
        return "unknown"
    return await _answered(resolve(check), check.check_count,
                           transaction_id=check.transaction_id)


async def _resolve(resolve: Resolver, check: CheckRequest) -> CheckStatus:
    return await _answered(resolve(check), check.check_count, message_id=check.message_id)


async def _answered(resolving: Awaitable[CheckStatus], attempt: int, **names: str
                    ) -> CheckStatus:
    """The resolver's answer, logged; ``unknown`` when it raised."""
    try:
        status = await resolving
    except Exception:
        log.exception("checkback.resolver_failed", **names, attempt=attempt)
        return "unknown"
    log.info("checkback.answered", **names, attempt=attempt, outcome=status)
    return status


def _answer(status: CheckStatus) -> CheckBackResponse:
    return CheckBackResponse(200, "application/json", orjson.dumps({"status": status}))


def _problem(status: int, title: str, detail: str) -> CheckBackResponse:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    return CheckBackResponse(status, "application/problem+json", orjson.dumps(body))
