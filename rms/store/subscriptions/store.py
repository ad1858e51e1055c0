"""The one store object of the subscription (:mod:`rms.store.subscriptions`): acks over HTTP
(concurrent ones share one statement) and from the ack topic, the targets an ack record is
judged against, releasing a consumer, and what each consumer owes."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import ARRAY, Text, any_, bindparam, select
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.batching import Coalescer
from rms.domain.listings import ConsumerBacklog
from rms.domain.models import Message
from rms.store.coalesced import select_messages
from rms.store.raw import RawStatement, driver_connection, item_specific
from rms.store.rows import message_from
from rms.store.schema import messages
from rms.store.subscriptions import release, views
from rms.store.subscriptions.acks import ACK_MANY_SQL, ACK_SQL, AckItem, AckTarget, apply_acks

Written = tuple[Message | None, bool]

ACK_TARGETS = select(messages.c.message_id, messages.c.topic, messages.c.created_at).where(
    messages.c.message_id == any_(bindparam("ids", type_=ARRAY(Text))))


class SubscriptionStore:
    def __init__(self, engine: AsyncEngine, max_batch: int = 500, max_inflight: int = 4) -> None:
        self._engine = engine
        self._targets = RawStatement(ACK_TARGETS, engine.dialect)
        self._acks: Coalescer[AckItem, Written] = Coalescer(
            self._flush_acks, name="ack", max_items=max_batch, max_inflight=max_inflight,
            item_specific=item_specific)

    # ---- acks ------------------------------------------------------------------------------

    async def ack(self, message_id: str, consumer: str, via: str) -> Written:
        """``consumer``'s ack of a message (:mod:`.acks`): ``(the row it changed, True)``, or
        ``(the row as it stands or None, False)`` when it changed nothing (a repeat, a
        ``done`` message, an app not permitted or not a subscriber, another state).
        Concurrent acks share one statement."""
        return await self._acks.submit(AckItem(message_id, consumer, via))

    async def ack_many(self, items: Sequence[AckItem]) -> list[str]:
        """Record many acks (the ack-topic consumer's path), each only while the stored row is
        the instance its ``created_at`` names; a statement per round of distinct ids
        (:func:`.acks.rounds`: one, unless two consumers ack one message in the batch).
        Returns the ids of the items whose ack was recorded; the others were recorded
        already, unknown, not yet sent, not the consumer's to ack or another instance."""
        unique = list(dict.fromkeys(items))
        if not unique:
            return []
        async with driver_connection(self._engine) as driver:
            rows = await apply_acks(driver, ACK_MANY_SQL, unique)
        return [row["message_id"] for row in rows if row is not None]

    async def ack_targets(self, message_ids: Sequence[str]) -> dict[str, AckTarget]:
        """The topic and creation time of each known id: what an ack's permission and
        instance checks need, without payloads."""
        if not message_ids:
            return {}
        rows = await self._targets.fetch(self._engine, ids=list(message_ids))
        return {row["message_id"]: AckTarget(row["topic"], row["created_at"]) for row in rows}

    async def _flush_acks(self, items: Sequence[AckItem]) -> list[Written]:
        async with driver_connection(self._engine) as driver:
            rows = await apply_acks(driver, ACK_SQL, items)
            missed = list(dict.fromkeys(
                item.message_id for item, row in zip(items, rows, strict=True) if row is None))
            rest = await select_messages(driver, missed)
        return [(message_from(row), True) if row is not None else (rest.get(item.message_id), False)
                for item, row in zip(items, rows, strict=True)]

    # ---- releasing a consumer ----------------------------------------------------------------

    async def set_consume_topics(self, app: str, patterns: tuple[str, ...]) -> int:
        """Replace the app's consume topics, releasing it from the messages of the topics it
        no longer consumes (:mod:`.release`); returns how many released it."""
        return await release.set_consume_topics(self._engine, app, patterns)

    async def delete_app(self, app: str) -> int:
        """Delete the app, releasing it from every message it owes (:mod:`.release`); returns
        how many released it."""
        return await release.delete_app(self._engine, app)

    # ---- what each consumer owes -------------------------------------------------------------

    async def consumer_backlogs(self) -> list[ConsumerBacklog]:
        """Per consumer app, the ``sent`` messages it owes and the age of the oldest
        (:mod:`.views`)."""
        return await views.consumer_backlogs(self._engine)

