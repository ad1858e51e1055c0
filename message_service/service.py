"""Use cases of the message service: validate, store, publish. HTTP-free, so the CLI, the
workers and tests call the same functions."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import orjson
import structlog

from message_service.schemas import PrepareRequest
from rms import metrics
from rms.callback_urls import PassedHosts, validate_check_url
from rms.config import Settings
from rms.delivery import Dispatcher
from rms.domain.errors import Forbidden, Invalid, NotFound, PayloadTooLarge
from rms.domain.ids import new_message_id
from rms.domain.models import Actor, App, Message, NewMessage
from rms.domain.topics import topic_allowed
from rms.kafka.records import RESERVED_HEADER_PREFIX
from rms.store.messages import ACK, CANCEL, CONFIRM, RESEND, MessageStore, Transition
from rms.store.transitions import delivery_detail

log = structlog.get_logger(__name__)
T = TypeVar("T")


@dataclass
class MessageService:
    settings: Settings
    store: MessageStore
    dispatcher: Dispatcher
    passed_hosts: PassedHosts = field(default_factory=PassedHosts)

    # ---- producer side -------------------------------------------------------------------

    async def prepare(self, app: App, request: PrepareRequest, *, one_shot: bool
                      ) -> tuple[Message, bool]:
        draft = await self.draft(app, request)
        message, created = await self.store.prepare(app.name, draft, one_shot=one_shot)
        if created:
            metrics.TRANSITIONS.labels("sent" if one_shot else "prepared").inc()
            if one_shot:
                await self._publish_first(message)
        return message, created

    async def prepare_batch(self, app: App, requests: Sequence[PrepareRequest]) -> list[Message]:
        self._check_batch_size(len(requests))
        drafts = [await self._draft_item(app, index, req) for index, req in enumerate(requests)]
        duplicates = _first_duplicate([d.message_id for d in drafts])
        if duplicates is not None:
            raise Invalid(f"messages[{duplicates[1]}]: message_id {duplicates[0]!r} appears "
                          "twice in the batch")
        results = await self.store.prepare_batch(app.name, drafts)
        metrics.TRANSITIONS.labels("prepared").inc(sum(1 for _, created in results if created))
        return [message for message, _ in results]

    async def confirm(self, app: App, message_id: str) -> Message:
        message, changed = await self.store.transition(
            message_id, CONFIRM, app=app.name, actor=f"app:{app.name}", by=Actor.PRODUCER)
        if changed:
            metrics.TRANSITIONS.labels("confirmed").inc()
            await self._publish_first(message)
        return message

    async def cancel(self, app: App, message_id: str) -> Message:
        message, changed = await self.store.transition(
            message_id, CANCEL, app=app.name, actor=f"app:{app.name}", by=Actor.PRODUCER)
        if changed:
            metrics.TRANSITIONS.labels("cancelled").inc()
        return message

    async def confirm_batch(self, app: App, message_ids: Sequence[str]) -> list[Message]:
        results = await self._batch(app, message_ids, CONFIRM)
        changed = [message for message, did in results if did]
        metrics.TRANSITIONS.labels("confirmed").inc(len(changed))
        await asyncio.gather(*(self._publish_first(message) for message in changed))
        return [message for message, _ in results]

    async def cancel_batch(self, app: App, message_ids: Sequence[str]) -> list[Message]:
        results = await self._batch(app, message_ids, CANCEL)
        metrics.TRANSITIONS.labels("cancelled").inc(sum(1 for _, did in results if did))
        return [message for message, _ in results]

    # ---- consumer side -------------------------------------------------------------------

    async def ack(self, app: App, message_id: str) -> Message:
        current = await self.store.get(message_id)
        if not topic_allowed(current.topic, app.consume_topics):
            if current.app != app.name:
                raise NotFound(f"no message {message_id!r}")
            raise Forbidden(f"topic {current.topic!r} is not in app {app.name!r}'s "
                            "consume_topics")
        message, changed = await self.store.transition(
            message_id, ACK, app=None, actor=f"app:{app.name}", detail={"via": "http"})
        if changed:
            metrics.ACKS.labels("http").inc()
        return message

    # ---- operator side -------------------------------------------------------------------

    async def admin_confirm(self, message_id: str, *, actor: str = "admin") -> Message:
        message, changed = await self.store.transition(
            message_id, CONFIRM, app=None, actor=actor, by=Actor.ADMIN)
        if changed:
            metrics.TRANSITIONS.labels("confirmed").inc()
            await self._publish_first(message)
        return message

    async def admin_cancel(self, message_id: str, *, actor: str = "admin") -> Message:
        message, changed = await self.store.transition(
            message_id, CANCEL, app=None, actor=actor, by=Actor.ADMIN)
        if changed:
            metrics.TRANSITIONS.labels("cancelled").inc()
        return message

    async def admin_resend(self, message_id: str, *, actor: str = "admin") -> Message:
        """Publish a ``sent`` message again now (dead or not), clear ``dead`` and restart its
        delivery budget; ``delivery_count`` keeps counting."""
        message, _ = await self.store.transition(message_id, RESEND, app=None, actor=actor,
                                                 detail=delivery_detail)
        metrics.TRANSITIONS.labels("resent").inc()
        await self.dispatcher.deliver(message, actor=actor, reschedule=True)
        return await self.store.get(message_id)

    # ---- helpers -------------------------------------------------------------------------

    async def draft(self, app: App, request: PrepareRequest) -> NewMessage:
        """Validate a prepare request against the app's permissions and the limits."""
        if not topic_allowed(request.topic, app.produce_topics):
            raise Forbidden(f"topic {request.topic!r} is not in app {app.name!r}'s "
                            "produce_topics")
        self._check_payload(request)
        self._check_headers(request.headers)
        check_url = request.check_url or app.default_check_url
        if check_url is None:
            raise Invalid("check_url is required (the app has no default_check_url)")
        check_url = await validate_check_url(check_url, app.check_url_prefixes,
                                             allow_private=self.settings.allow_private_callbacks,
                                             passed=self.passed_hosts)
        policy = self.settings.policy
        return NewMessage(
            message_id=request.message_id or new_message_id(),
            topic=request.topic,
            key=request.key,
            payload=request.payload,
            headers=request.headers,
            check_url=check_url,
            check_after_seconds=_pick(request.check_after_seconds, policy.check_after_seconds),
            max_checks=_pick(request.max_checks, policy.max_checks),
            ack_timeout_seconds=_pick(request.ack_timeout_seconds, policy.ack_timeout_seconds),
            max_deliveries=_pick(request.max_deliveries, policy.max_deliveries),
        )

    async def _draft_item(self, app: App, index: int, request: PrepareRequest) -> NewMessage:
        try:
            return await self.draft(app, request)
        except (Forbidden, Invalid, PayloadTooLarge) as exc:
            raise type(exc)(f"messages[{index}]: {exc.detail}") from exc

    async def _publish_first(self, message: Message) -> None:
        await self.dispatcher.deliver(message, actor=f"app:{message.app}", reschedule=False)

    async def _batch(self, app: App, message_ids: Sequence[str], change: Transition
                     ) -> list[tuple[Message, bool]]:
        """Batch confirm/cancel: one transaction, all or nothing; a failure names the item."""
        self._check_batch_size(len(message_ids))
        duplicate = _first_duplicate(list(message_ids))
        if duplicate is not None:
            raise Invalid(f"message_ids[{duplicate[1]}]: {duplicate[0]!r} appears twice")
        return await self.store.transition_many(
            message_ids, change, app=app.name, actor=f"app:{app.name}", by=Actor.PRODUCER)

    def _check_batch_size(self, count: int) -> None:
        if count > self.settings.max_batch_items:
            raise PayloadTooLarge(f"a batch holds at most {self.settings.max_batch_items} "
                                  f"items; this one has {count}")

    def _check_payload(self, request: PrepareRequest) -> None:
        encoded = orjson.dumps(request.payload)  # encodable: PrepareRequest checked it
        if len(encoded) > self.settings.max_payload_bytes:
            raise PayloadTooLarge(f"payload is {len(encoded)} bytes; the limit is "
                                  f"{self.settings.max_payload_bytes} (RMS_MAX_PAYLOAD_BYTES)")
        if _ENCODED_NUL.search(encoded):
            raise Invalid(_NUL)
        if any("\x00" in text for text in (request.key or "", request.check_url or "")):
            raise Invalid(_NUL)

    def _check_headers(self, headers: dict[str, str]) -> None:
        if len(headers) > self.settings.max_headers:
            raise Invalid(f"at most {self.settings.max_headers} headers are allowed; "
                          f"got {len(headers)}")
        if any("\x00" in name or "\x00" in value for name, value in headers.items()):
            raise Invalid(_NUL)
        for name in headers:
            if not name or name.lower().startswith(RESERVED_HEADER_PREFIX):
                raise Invalid(f"header name {name!r} is empty or uses the reserved "
                              f"'{RESERVED_HEADER_PREFIX}' prefix")
        size = sum(len(k.encode()) + len(v.encode()) for k, v in headers.items())
        if size > self.settings.max_header_bytes:
            raise Invalid(f"headers total {size} bytes; the limit is "
                          f"{self.settings.max_header_bytes}")


# a JSON escape \u0000 (an even number of backslashes before it, so not the text "\\u0000")
_ENCODED_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")
_NUL = ("the NUL character (\\u0000) cannot be stored (PostgreSQL text and jsonb refuse it); "
        "payload, key, headers and check_url must not contain it")


def _pick(override: T | None, default: T) -> T:
    return default if override is None else override


def _first_duplicate(ids: list[str]) -> tuple[str, int] | None:
    seen: set[str] = set()
    for index, message_id in enumerate(ids):
        if message_id in seen:
            return message_id, index
        seen.add(message_id)
    return None
