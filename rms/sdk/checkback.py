"""The producer's check-back endpoint (design section 5) as a FastAPI router.

RMS calls ``POST <check_url>`` when a message (or a transaction of several messages) stayed
pending; the router proves the call
is RMS's (Standard Webhooks signature over the raw body, timestamp within tolerance, each
``webhook-id`` used once), hands the request to the producer's ``resolve`` function and answers
``{"status": "committed" | "rolled_back" | "unknown"}``. A resolver that raises answers
``unknown`` (RMS asks again later) rather than an error page.

Usage::

    barrier = Barrier(engine)
    app.include_router(checkback_router(barrier.resolve, secrets=[signing_secret],
                                        resolve_transaction=barrier.resolve_transaction))

During a signing-secret rotation pass both secrets: calls signed with either are accepted.
Replays are remembered in memory by default; several replicas behind a load balancer should
pass a shared :class:`ReplayGuard`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, Protocol

import orjson
import structlog
from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, ValidationError

from rms.sdk.signing import DEFAULT_TOLERANCE_SECONDS, SignatureError, Verifier

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


class CheckAnswer(BaseModel):
    status: CheckStatus


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


def checkback_router(resolve: Resolver, *, secrets: Sequence[str], path: str = DEFAULT_PATH,
                     tolerance_seconds: float = DEFAULT_TOLERANCE_SECONDS,
                     replay_guard: ReplayGuard | None = None,
                     resolve_transaction: TransactionResolver | None = None) -> APIRouter:
    """A router serving ``POST path`` for RMS check-backs, answered by ``resolve`` (a
    message) or ``resolve_transaction`` (a transaction of several messages; without it such a
    call answers ``unknown``)."""
    verifier = Verifier(secrets, tolerance_seconds)
    guard = replay_guard or MemoryReplayGuard()
    router = APIRouter(tags=["rms"])

    @router.post(path, response_model=CheckAnswer, responses={
        401: {"description": "signature missing, wrong or stale"},
        409: {"description": "webhook-id already used (replay)"},
        422: {"description": "body is not a check-back request"}})
    async def rms_check_back(request: Request) -> Response:
        """RMS asks whether the local transaction of a pending-send message committed."""
        body = await request.body()
        try:
            verified = verifier.verify(request.headers, body)
        except SignatureError as exc:
            return _problem(401, "Invalid signature", str(exc))
        if not await guard.first_use(verified.webhook_id,
                                     verified.timestamp + 2 * tolerance_seconds):
            return _problem(409, "Replayed request", f"webhook-id {verified.webhook_id!r} "
                            "was already used")
        try:
            if _about_transaction(body):
                transaction = TransactionCheckRequest.model_validate_json(body)
                return _answer(await _resolve_transaction(resolve_transaction, transaction))
            check = CheckRequest.model_validate_json(body)
        except ValidationError as exc:
            return _problem(422, "Not a check-back request", str(exc).splitlines()[0])
        return _answer(await _resolve(resolve, check))

    return router


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


def _answer(status: CheckStatus) -> Response:
    return Response(orjson.dumps({"status": status}), media_type="application/json")


def _problem(status: int, title: str, detail: str) -> Response:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    return Response(orjson.dumps(body), status_code=status,
                    media_type="application/problem+json")
