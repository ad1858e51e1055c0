"""The message use cases of producers and operators: prepare (and one-shot send), confirm and
cancel, one at a time or as an all-or-nothing batch, and the reads of a message and its
history. Every state change goes through the transition table's guarded statements; a
confirmed or sent message is published through the one publish path."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from rms import metrics
from rms.config import Settings
from rms.dispatcher import Dispatcher
from rms.domain import transitions as table
from rms.domain.errors import Invalid
from rms.domain.models import Actor, App, Message, MessageEvent, PublishOutcome
from rms.store.messages import MessageStore
from rms.usecases.drafts import CheckedUrls, Drafts, PrepareInput, first_duplicate
from rms_client import tracing
from rms_client.trace import TraceContext


@dataclass
class MessageService:
    settings: Settings
    store: MessageStore
    dispatcher: Dispatcher
    drafts: Drafts = field(init=False)

    def __post_init__(self) -> None:
        self.drafts = Drafts(self.settings)

    # ---- producer side -------------------------------------------------------------------

    async def prepare(self, app: App, request: PrepareInput, *, one_shot: bool,
                      trace: TraceContext | None = None) -> tuple[Message, bool]:
        """Store a new message with ``trace`` (the request's W3C context), or with the
        prepare span's context when spans are recorded."""
        with tracing.start("rms.send" if one_shot else "rms.prepare", trace, in_request=True,
                           attributes={"rms.app": app.name}) as span:
            draft = replace(await self.drafts.draft(app, request), trace=span.context)
            span.set("rms.message_id", draft.message_id)
            message, created = await self.store.prepare(app.name, draft, one_shot=one_shot)
            if created:
                metrics.TRANSITIONS.labels("sent" if one_shot else "prepared").inc()
                if one_shot:
                    message = await self._publish_first(message, span.context)
        return message, created

    async def prepare_batch(self, app: App, requests: Sequence[PrepareInput],
                            trace: TraceContext | None = None) -> list[Message]:
        with tracing.start("rms.prepare_batch", trace, in_request=True,
                           attributes={"rms.app": app.name, "rms.messages": len(requests)}
                           ) as span:
            return await self._prepare_batch(app, requests, span.context)

    async def _prepare_batch(self, app: App, requests: Sequence[PrepareInput],
                             trace: TraceContext | None) -> list[Message]:
        self.drafts.check_batch_size(len(requests))
        urls: CheckedUrls = {}
        drafts = [replace(await self.drafts.draft_item(app, index, req, req, urls), trace=trace)
                  for index, req in enumerate(requests)]
        duplicates = first_duplicate([d.message_id for d in drafts])
        if duplicates is not None:
            raise Invalid(f"messages[{duplicates[1]}]: message_id {duplicates[0]!r} appears "
                          "twice in the batch")
        results = await self.store.prepare_batch(app.name, drafts)
        metrics.TRANSITIONS.labels("prepared").inc(sum(1 for _, created in results if created))
        return [message for message, _ in results]

    async def confirm(self, app: App, message_id: str) -> Message:
        """A producer's confirm, answered once the broker's answer to the first publish is
        recorded, or (``RMS_CONFIRM_ANSWER=committed``) once the confirm is durable, with the
        reserved publish handed to the dispatcher."""
        started = tracing.clock()
        message, changed = await self.store.transition(
            message_id, table.CONFIRM, app=app.name, actor=f"app:{app.name}", by=Actor.PRODUCER)
        if not changed:
            return message
        metrics.TRANSITIONS.labels("confirmed").inc()
        if self.settings.confirm_answer == "committed":
            self.dispatcher.hand_off(self._publish_confirmed(message, started),
                                     message_id=message_id)
            return message
        return await self._publish_confirmed(message, started)

    async def cancel(self, app: App, message_id: str) -> Message:
        message, changed = await self.store.transition(
            message_id, table.CANCEL, app=app.name, actor=f"app:{app.name}", by=Actor.PRODUCER)
        if changed:
            metrics.TRANSITIONS.labels("cancelled").inc()
        return message

    async def confirm_batch(self, app: App, message_ids: Sequence[str]) -> list[Message]:
        started = tracing.clock()
        results = await self._batch(app, message_ids, table.CONFIRM)
        changed = [message for message, did in results if did]
        metrics.TRANSITIONS.labels("confirmed").inc(len(changed))
        outcomes = await self._publish_confirmed_many(changed, started, actor=f"app:{app.name}")
        return await self._as_recorded([message for message, _ in results], outcomes)

    async def cancel_batch(self, app: App, message_ids: Sequence[str]) -> list[Message]:
        results = await self._batch(app, message_ids, table.CANCEL)
        metrics.TRANSITIONS.labels("cancelled").inc(sum(1 for _, did in results if did))
        return [message for message, _ in results]

    async def message(self, message_id: str, *, app: App | None = None) -> Message:
        """A message (of ``app``, when given: another app's is not found)."""
        return await self.store.get(message_id, app=None if app is None else app.name)

    async def events(self, message_id: str, *, app: App | None = None, limit: int | None = None,
                     cursor: str | None = None) -> tuple[list[MessageEvent], str | None]:
        """A message's history (of ``app``, when given), a page of at most ``limit`` events
        after ``cursor``, and the next page's cursor."""
        await self.message(message_id, app=app)
        return await self.store.events(message_id, limit, cursor)

    async def pending_count(self, app: str) -> int:
        """The app's pending-send messages, for the per-app cap."""
        return await self.store.pending_count(app)

    # ---- operator side -------------------------------------------------------------------

    async def admin_confirm(self, message_id: str, *, actor: str = "admin") -> Message:
        started = tracing.clock()
        message, changed = await self.store.transition(
            message_id, table.CONFIRM, app=None, actor=actor, by=Actor.ADMIN)
        if changed:
            metrics.TRANSITIONS.labels("confirmed").inc()
            return await self._publish_confirmed(message, started)
        return message

    async def admin_cancel(self, message_id: str, *, actor: str = "admin") -> Message:
        message, changed = await self.store.transition(
            message_id, table.CANCEL, app=None, actor=actor, by=Actor.ADMIN)
        if changed:
            metrics.TRANSITIONS.labels("cancelled").inc()
        return message

    # ---- helpers -------------------------------------------------------------------------

    async def _publish_first(self, message: Message, trace: TraceContext | None) -> Message:
        """The first publish of a message just made ``sent``; returns the message as the
        answer states it (:meth:`_as_recorded`)."""
        outcome = await self.dispatcher.deliver_confirmed(message, actor=f"app:{message.app}",
                                                          parent=trace)
        [answered] = await self._as_recorded([message], [] if outcome is None else [outcome])
        return answered

    async def _publish_confirmed(self, message: Message, started: int | None) -> Message:
        """The first publish of a confirmed message, under a confirm span parented on the
        message's stored trace context (the span starts when the confirm began)."""
        with _confirm_span(message, started) as span:
            return await self._publish_first(message, span.context)

    async def _as_recorded(self, batch: Sequence[Message], outcomes: Sequence[PublishOutcome]
                           ) -> list[Message]:
        """``batch`` as its publishes left it. A message the confirming statement returned
        counts its first delivery and an ack deadline; when the broker did not take that
        publish, the answer is the row as the outcome was recorded instead: the delivery
        number given back, due again at its retry time, ``publish_failure`` naming why."""
        failed = [outcome.message_id for outcome in outcomes if not outcome.ok]
        if not failed:
            return list(batch)
        recorded = await self.store.get_many(failed)
        return [recorded.get(message.message_id, message) for message in batch]

    async def _publish_confirmed_many(self, batch: Sequence[Message], started: int | None, *,
                                      actor: str) -> list[PublishOutcome]:
        """:meth:`_publish_confirmed` for the messages of one batch confirm: the first
        publishes go to the producer together and their outcomes are recorded by one write."""
        spans = ([_confirm_span(message, started) for message in batch] if tracing.enabled()
                 else [tracing.Span(message.trace) for message in batch])  # record nothing
        try:
            return await self.dispatcher.deliver_confirmed_many(
                batch, actor=actor, parents=[span.context for span in spans])
        except BaseException as exc:
            for span in spans:
                span.fail(f"{type(exc).__name__}: {exc}")
            raise
        finally:
            for span in spans:
                span.end()

    async def _batch(self, app: App, message_ids: Sequence[str], change: table.Transition
                     ) -> list[tuple[Message, bool]]:
        """Batch confirm/cancel: one transaction, all or nothing; a failure names the item."""
        self.drafts.check_batch_size(len(message_ids))
        duplicate = first_duplicate(list(message_ids))
        if duplicate is not None:
            raise Invalid(f"message_ids[{duplicate[1]}]: {duplicate[0]!r} appears twice")
        return await self.store.transition_many(
            message_ids, change, app=app.name, actor=f"app:{app.name}", by=Actor.PRODUCER)


def _confirm_span(message: Message, started: int | None) -> tracing.Span:
    """The confirm span of a message's first publish, parented on its stored trace context
    (it starts when the confirm began)."""
    return tracing.start("rms.confirm", message.trace, started_ns=started,
                         attributes={"rms.app": message.app, "rms.message_id": message.message_id})
