"""The producer side of the RMS Python SDK: prepare / send / confirm / cancel / get over the
HTTP API, retried safely, and a transactional helper.

Retries are safe because every call is idempotent by ``message_id``: the client picks the id
before the first attempt, so a prepare whose answer was lost is repeated under the same id and
RMS answers 200 with the stored message; confirm and cancel are idempotent by design (section 4).
Network errors and 408/429/502/503/504 are retried with capped exponential backoff; anything else
is raised at once as an :class:`RmsError` carrying the problem document.

Usage::

    async with RmsProducer("http://rms:8000", api_key="rms_...") as rms:
        async with rms.transaction("orders.paid", {"order": 42}, message_id="order-42-paid",
                                   check_url="https://orders.internal/rms/check"):
            async with engine.begin() as conn:      # the local transaction
                await barrier.mark_committed(conn, "order-42-paid")
                await conn.execute(...)
        # confirmed here; cancelled if the block raised

A crash between the local commit and the confirm leaves the message pending-send: the confirm
service then asks ``check_url`` (see :mod:`rms_client.checkback` and :mod:`rms_client.barrier`).

Several messages that must be delivered all or not at all, in their order, form a transaction::

    drafts = [Draft("orders.paid", {"order": 42}), Draft("billing.invoice", {"order": 42})]
    async with rms.transaction(drafts, transaction_id="order-42") as tx:
        async with engine.begin() as conn:
            await barrier.mark_committed(conn, tx.transaction_id)
            await conn.execute(...)
    # both confirmed here, published in this order; both cancelled if the block raised
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any, overload

import httpx
import structlog

from rms_client import http, tracing
from rms_client.ids import new_message_id
from rms_client.timestamps import format_rfc3339

log = structlog.get_logger(__name__)
RETRY_STATUSES = frozenset({408, 429, 502, 503, 504})


class RmsError(Exception):
    """RMS refused the request; ``status`` and the problem document say why."""

    def __init__(self, status: int | None, detail: str, problem: Mapping[str, Any] | None = None
                 ) -> None:
        super().__init__(f"{status or 'no answer'}: {detail}")
        self.status = status
        self.detail = detail
        self.problem = dict(problem or {})


class RmsNotFound(RmsError):
    """404: unknown message, or another app's."""


class RmsConflict(RmsError):
    """409: illegal transition (e.g. confirm of a deleted message) or an id reused with other
    content."""


class RmsUnavailable(RmsError):
    """RMS could not be reached or stayed overloaded through every retry."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempts: int = 4
    backoff_seconds: float = 0.2
    max_backoff_seconds: float = 5.0

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        """Seconds before attempt ``attempt + 1``: Retry-After when given, else doubling with
        jitter; always capped."""
        if retry_after is not None and retry_after.isdigit():
            return min(float(retry_after), self.max_backoff_seconds)
        base = min(self.max_backoff_seconds, self.backoff_seconds * 2.0 ** (attempt - 1))
        return float(base * random.uniform(0.5, 1.0))


@dataclass(frozen=True, slots=True)
class MessageInfo:
    """A message as RMS reports it (the API's message object; ``raw`` has every field)."""

    message_id: str
    state: str
    topic: str
    dead: bool
    check_count: int
    delivery_count: int
    created_at: datetime
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MessageInfo:
        return cls(message_id=str(data["message_id"]), state=str(data["state"]),
                   topic=str(data["topic"]), dead=bool(data["dead"]),
                   check_count=int(data["check_count"]),
                   delivery_count=int(data["delivery_count"]),
                   created_at=datetime.fromisoformat(str(data["created_at"])), raw=dict(data))


@dataclass(frozen=True, slots=True)
class Draft:
    """A message to prepare or send. ``message_id`` defaults to a new time-ordered id (fixed
    before the first attempt, which is what makes retries safe)."""

    topic: str
    payload: Any
    message_id: str | None = None
    key: str | None = None
    headers: Mapping[str, str] | None = None
    check_url: str | None = None
    check_after_seconds: float | None = None
    max_checks: int | None = None
    ack_timeout_seconds: float | None = None
    max_deliveries: int | None = None
    # delayed delivery: an aware datetime, or seconds after the prepare (not both)
    deliver_after: datetime | None = None
    delay_seconds: float | None = None

    def member_body(self, message_id: str) -> dict[str, Any]:
        """The body of this draft as a message of a transaction (the transaction carries the
        check-back fields)."""
        own = [name for name in ("check_url", "check_after_seconds", "max_checks")
               if getattr(self, name) is not None]
        if own:
            raise ValueError(f"a message of a transaction has no {', '.join(own)} of its own: "
                             "give them to the transaction")
        body: dict[str, Any] = {"message_id": message_id, "topic": self.topic,
                                "payload": self.payload}
        optional = {"key": self.key, "headers": dict(self.headers) if self.headers else None,
                    "ack_timeout_seconds": self.ack_timeout_seconds,
                    "max_deliveries": self.max_deliveries}
        return body | {k: v for k, v in optional.items() if v is not None}

    def body(self, message_id: str, default_check_url: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {"message_id": message_id, "topic": self.topic,
                                "payload": self.payload}
        optional = {"key": self.key, "headers": dict(self.headers) if self.headers else None,
                    "check_url": self.check_url or default_check_url,
                    "check_after_seconds": self.check_after_seconds,
                    "max_checks": self.max_checks,
                    "ack_timeout_seconds": self.ack_timeout_seconds,
                    "max_deliveries": self.max_deliveries,
                    "deliver_after": (None if self.deliver_after is None
                                      else format_rfc3339(self.deliver_after)),
                    "delay_seconds": self.delay_seconds}
        return body | {k: v for k, v in optional.items() if v is not None}


@dataclass(frozen=True, slots=True)
class TransactionInfo:
    """A transaction of several messages as RMS reports it (``raw`` has every field)."""

    transaction_id: str
    state: str
    dead: bool
    check_count: int
    messages: tuple[MessageInfo, ...]
    raw: dict[str, Any] = field(repr=False)

    @property
    def message_ids(self) -> list[str]:
        return [m.message_id for m in self.messages]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TransactionInfo:
        return cls(transaction_id=str(data["transaction_id"]), state=str(data["state"]),
                   dead=bool(data["dead"]), check_count=int(data["check_count"]),
                   messages=tuple(MessageInfo.from_json(m) for m in data["messages"]),
                   raw=dict(data))


class RmsProducer:
    """An async client for one app. Pass ``client`` to reuse an httpx client (its base URL is
    then used); otherwise one is created and closed by :meth:`aclose`."""

    def __init__(self, base_url: str | None = None, api_key: str = "", *,
                 client: httpx.AsyncClient | None = None, timeout_seconds: float = 10.0,
                 retry: RetryPolicy | None = None, default_check_url: str | None = None) -> None:
        if client is None and base_url is None:
            raise ValueError("give base_url or client")
        self._owned = client is None
        self._client = client or httpx.AsyncClient(base_url=base_url or "",
                                                   timeout=timeout_seconds)
        self._auth = {"authorization": f"Bearer {api_key}"}
        self._retry = retry or RetryPolicy()
        self.default_check_url = default_check_url

    async def __aenter__(self) -> RmsProducer:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owned:
            await self._client.aclose()

    # ---- the API ------------------------------------------------------------------------

    async def prepare(self, topic: str, payload: Any, **options: Any) -> MessageInfo:
        """Store a pending-send message (not delivered until confirmed). ``options`` are the
        fields of :class:`Draft`."""
        return await self.prepare_draft(Draft(topic, payload, **options))

    async def prepare_draft(self, draft: Draft) -> MessageInfo:
        body = draft.body(draft.message_id or new_message_id(), self.default_check_url)
        return MessageInfo.from_json(await self._call("POST", "/v1/messages", body))

    async def send(self, topic: str, payload: Any, **options: Any) -> MessageInfo:
        """One-shot prepare + confirm, for a message outside any local transaction."""
        draft = Draft(topic, payload, **options)
        body = draft.body(draft.message_id or new_message_id(), self.default_check_url)
        return MessageInfo.from_json(await self._call("POST", "/v1/messages/send", body))

    async def confirm(self, message_id: str) -> MessageInfo:
        return MessageInfo.from_json(
            await self._call("POST", f"/v1/messages/{message_id}/confirm"))

    async def cancel(self, message_id: str) -> MessageInfo:
        return MessageInfo.from_json(
            await self._call("POST", f"/v1/messages/{message_id}/cancel"))

    async def get(self, message_id: str) -> MessageInfo:
        return MessageInfo.from_json(await self._call("GET", f"/v1/messages/{message_id}"))

    async def prepare_transaction(self, drafts: Sequence[Draft], *,
                                  transaction_id: str | None = None,
                                  check_url: str | None = None,
                                  check_after_seconds: float | None = None,
                                  max_checks: int | None = None) -> TransactionInfo:
        """Store a pending transaction of several messages (published in this order once
        confirmed; none of them if cancelled). Ids are fixed before the first attempt, so a
        retry is answered with the stored transaction."""
        items = [d.member_body(d.message_id or new_message_id()) for d in drafts]
        body: dict[str, Any] = {"transaction_id": transaction_id or new_message_id(),
                                "messages": items}
        optional = {"check_url": check_url or self.default_check_url,
                    "check_after_seconds": check_after_seconds, "max_checks": max_checks}
        body |= {k: v for k, v in optional.items() if v is not None}
        return TransactionInfo.from_json(await self._call("POST", "/v1/transactions", body))

    async def confirm_transaction(self, transaction_id: str) -> TransactionInfo:
        return TransactionInfo.from_json(
            await self._call("POST", f"/v1/transactions/{transaction_id}/confirm"))

    async def cancel_transaction(self, transaction_id: str) -> TransactionInfo:
        return TransactionInfo.from_json(
            await self._call("POST", f"/v1/transactions/{transaction_id}/cancel"))

    async def get_transaction(self, transaction_id: str) -> TransactionInfo:
        return TransactionInfo.from_json(
            await self._call("GET", f"/v1/transactions/{transaction_id}"))

    # ---- the transactional helpers --------------------------------------------------------

    @overload
    def transaction(self, messages: str, payload: Any, **options: Any
                    ) -> contextlib.AbstractAsyncContextManager[MessageInfo]: ...

    @overload
    def transaction(self, messages: Sequence[Draft], payload: None = None, **options: Any
                    ) -> contextlib.AbstractAsyncContextManager[TransactionInfo]: ...

    def transaction(self, messages: str | Sequence[Draft], payload: Any = None, **options: Any
                    ) -> contextlib.AbstractAsyncContextManager[MessageInfo | TransactionInfo]:
        """The local-transaction helper. ``transaction(topic, payload, **options)`` is
        :meth:`transactional` (one message); ``transaction([Draft, ...], **options)`` does the
        same for a transaction of several messages (``options``: ``transaction_id``,
        ``check_url``, ``check_after_seconds``, ``max_checks``): prepare them all, run the
        block, then confirm them all at once, or cancel them all if the block raised."""
        if isinstance(messages, str):
            return self.transactional(messages, payload, **options)
        if payload is not None:
            raise TypeError("the messages of a transaction carry their own payloads (Draft)")
        return self._several(list(messages), **options)

    @contextlib.asynccontextmanager
    async def _several(self, drafts: list[Draft], **options: Any
                       ) -> AsyncIterator[TransactionInfo]:
        prepared = await self.prepare_transaction(drafts, **options)
        try:
            yield prepared
        except Exception:
            await self._quietly(self.cancel_transaction, prepared.transaction_id)
            raise
        try:
            await self.confirm_transaction(prepared.transaction_id)
        except RmsUnavailable as exc:
            log.warning("rms.confirm_deferred_to_check_back",
                        transaction_id=prepared.transaction_id, error=str(exc))

    async def _quietly(self, cancel: Callable[[str], Awaitable[Any]], target_id: str) -> None:
        try:
            await cancel(target_id)
        except RmsError as exc:  # check-back will ask, and the barrier answers rolled_back
            log.warning("rms.cancel_failed", id=target_id, error=str(exc))

    @contextlib.asynccontextmanager
    async def transactional(self, topic: str, payload: Any, **options: Any
                            ) -> AsyncIterator[MessageInfo]:
        """Prepare, run the block (the caller's local transaction, committed inside it), then
        confirm; cancel instead if the block raised. If RMS is unreachable for the confirm the
        block's work stands and check-back confirms later, so nothing is raised; a confirm RMS
        refuses (409: check-back already rolled it back) is raised, since it means the local
        commit and the message disagree. Cancellation (task cancel, Ctrl-C) sends nothing:
        check-back resolves the message."""
        message = await self.prepare(topic, payload, **options)
        try:
            yield message
        except Exception:
            await self._cancel_quietly(message.message_id)
            raise
        await self._confirm_after_commit(message.message_id)

    async def _cancel_quietly(self, message_id: str) -> None:
        try:
            await self.cancel(message_id)
        except RmsError as exc:  # check-back will ask, and the barrier answers rolled_back
            log.warning("rms.cancel_failed", message_id=message_id, error=str(exc))

    async def _confirm_after_commit(self, message_id: str) -> None:
        try:
            await self.confirm(message_id)
        except RmsUnavailable as exc:
            log.warning("rms.confirm_deferred_to_check_back", message_id=message_id,
                        error=str(exc))

    # ---- transport ------------------------------------------------------------------------

    async def _call(self, method: str, path: str, body: Mapping[str, Any] | None = None
                    ) -> dict[str, Any]:
        """One logical request, retried on network errors and overload (and at once, not
        counted as an attempt, when the connection closes before any byte of the answer)."""
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await http.send(self._client, method, path, json=body,
                                           headers=self._auth | _trace_headers())
            except httpx.TransportError as exc:
                if attempt >= self._retry.attempts:
                    raise RmsUnavailable(None, f"{type(exc).__name__}: {exc}") from exc
                await asyncio.sleep(self._retry.delay(attempt))
                continue
            if response.status_code in RETRY_STATUSES and attempt < self._retry.attempts:
                await asyncio.sleep(self._retry.delay(attempt,
                                                      response.headers.get("retry-after")))
                continue
            return _result(response)


def _trace_headers() -> dict[str, str]:
    """The caller's current W3C trace context (its OpenTelemetry span), which RMS stores with
    a prepared message and carries on to the consumer; none outside a span."""
    trace = tracing.current_context()
    return {} if trace is None else trace.headers()


def _result(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        data = {}
    if response.is_success and isinstance(data, dict):
        return data
    problem = data if isinstance(data, dict) else {}
    detail = str(problem.get("detail") or response.reason_phrase or "unexpected answer")
    error = {404: RmsNotFound, 409: RmsConflict}.get(response.status_code, RmsError)
    if response.status_code in RETRY_STATUSES or response.status_code >= 500:
        error = RmsUnavailable
    raise error(response.status_code, detail, problem)
