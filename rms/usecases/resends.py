"""Resends, one message or dead letters in bulk (the HTTP API and, through it, ``rms dead``).

A resend is the RESEND transition (clears ``dead``, restarts the delivery budget, reserves the
next delivery number, records ``resent`` with the actor) followed by a publish through the one
publish path, :meth:`rms.dispatcher.Dispatcher.deliver`. An ordered message is instead made due
at once, and the sequencer publishes it ahead of the later messages of its key. In bulk only
dead ``sent`` messages are resent; a dead ``pending-send`` has an unknown outcome and is
resolved with admin confirm or cancel instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from rms import metrics
from rms.dispatcher import Dispatcher, sequenced
from rms.domain.listings import MessageFilter
from rms.domain.models import Message
from rms.store.admin import AdminStore
from rms.store.messages import MessageStore
from rms.store.redelivery import RedeliveryStore

log = structlog.get_logger(__name__)
MAX_BULK_RESEND = 1000
PUBLISH_CONCURRENCY = 64


@dataclass
class Resends:
    dispatcher: Dispatcher
    messages: MessageStore
    admin: AdminStore
    redeliveries: RedeliveryStore

    async def resend(self, message_id: str, *, actor: str = "admin") -> Message:
        """Publish a ``sent`` message again now (dead or not), clear ``dead`` and restart its
        delivery budget; ``delivery_count`` keeps counting."""
        message = await self.messages.resend(message_id, actor=actor)
        metrics.TRANSITIONS.labels("resent").inc()
        if not sequenced(message):
            await self.dispatcher.deliver(message, actor=actor, reschedule=True,
                                          span="rms.resend")
        return await self.messages.get(message_id)

    async def resend_dead(self, where: MessageFilter, limit: int, *, actor: str,
                          dry_run: bool) -> list[Message]:
        """Resend up to ``limit`` dead ``sent`` messages matching ``where``, oldest first, or
        with ``dry_run`` only list the ones that would be resent (nothing changes)."""
        if dry_run:
            return await self.admin.dead_candidates(where, limit)
        resent = await self.redeliveries.resend_dead(where, limit, actor)
        metrics.TRANSITIONS.labels("resent").inc(len(resent))
        metrics.DEAD_LETTERS_RESENT.inc(len(resent))
        log.info("dead_letters.resent", actor=actor, count=len(resent), app=where.app,
                 topic=where.topic)
        await self._publish(resent, actor)
        return await self._current(resent)

    async def _publish(self, resent: Sequence[Message], actor: str) -> None:
        gate = asyncio.Semaphore(PUBLISH_CONCURRENCY)

        async def one(message: Message) -> None:
            async with gate:
                await self.dispatcher.deliver(message, actor=actor, reschedule=True,
                                              span="rms.resend")

        await asyncio.gather(*(one(message) for message in resent if not sequenced(message)))

    async def _current(self, resent: Sequence[Message]) -> list[Message]:
        """The messages as they are after their publish (delivery count, next deadline)."""
        stored = await self.messages.get_many([m.message_id for m in resent])
        return [stored.get(m.message_id, m) for m in resent]
