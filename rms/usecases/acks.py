"""Acknowledgements, over HTTP and the ack topic alike: one rule decides who may acknowledge a
message (:func:`may_ack`), and both paths record the consumer's ack through the ACK
transition, which makes the message ``done`` once every subscriber acked (design section 3).

An ack-topic record counts only when ``consumer`` names an app whose ``consume_topics`` cover
the message's topic, (when signatures are required) it carries that app's signature, and it
was written for the message instance that holds the id now (:func:`written_for`, checked again
by the statement that writes the ack); anything else is counted by reason and skipped.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial

import structlog

from rms import metrics
from rms.config import Settings
from rms.domain import transitions as table
from rms.domain.ack_outcomes import NOT_RECORDED, RECORDED, Outcome, unrecorded
from rms.domain.errors import Forbidden, IllegalTransition, NotFound
from rms.domain.models import App, Message
from rms.domain.topics import topic_allowed
from rms.store.apps import AppStore
from rms.store.messages import MessageStore
from rms.store.subscriptions.acks import AckItem, AckTarget
from rms.store.subscriptions.store import SubscriptionStore
from rms.usecases.apps_repair import repair_consume_regexes
from rms_client.ack_records import (
    AckClaim,
    AckRecord,
    Rejection,
    claim_of,
    signature_problem,
    total,
    written_for,
)

log = structlog.get_logger(__name__)
_LOGGED_CONSUMERS = 10  # names a rejection line shows at most


def may_ack(app: App, topic: str) -> bool:
    """An app may acknowledge the messages of the topics it consumes."""
    return topic_allowed(topic, app.consume_topics)


@dataclass
class Acks:
    settings: Settings
    messages: MessageStore
    apps: AppStore
    subscriptions: SubscriptionStore

    async def ack(self, app: App, message_id: str) -> tuple[Message, Outcome]:
        """An ack over HTTP, written by one statement that also checks the app's permission:
        404 for a message the app can neither see nor consume, 403 for its own message on a
        topic it does not consume, 409 before the confirm or after a cancel. An ack that
        records nothing (a repeat, a ``done`` message, an app that is not a subscriber)
        answers 200 with why (:mod:`rms.domain.ack_outcomes`), and is counted."""
        current, changed = await self.subscriptions.ack(message_id, app.name, via="http")
        if not changed and current is not None and may_ack(app, current.topic) \
                and unrecorded(current, app.name) is None:
            # the row says the ack counts and the statement did not: the app's topics were
            # written by an earlier release; repaired, the ack is tried once more
            await repair_consume_regexes(self.apps)
            current, changed = await self.subscriptions.ack(message_id, app.name, via="http")
        if changed and current is not None:
            metrics.ACKS.labels("http").inc()
            return current, RECORDED
        if current is None or not may_ack(app, current.topic):
            if current is None or current.app != app.name:
                raise NotFound(f"no message {message_id!r}")
            raise Forbidden(f"topic {current.topic!r} is not in app {app.name!r}'s "
                            "consume_topics")
        if current.state not in (table.ACK.source, *table.ACK.already):
            raise IllegalTransition(message_id, table.ACK.action, current.state.value)
        return current, _not_recorded("http", current, app.name)

    async def apply_records(self, records: Iterable[AckRecord]) -> int:
        """Apply a batch of ack-topic records; returns how many acks were recorded.

        Each record is judged alone by total functions (:mod:`rms_client.ack_records`): one
        that is malformed, unsigned, names an unknown app or a message its app may not
        acknowledge is counted and skipped, never raised, so it cannot hold back the records
        after it; so is one written for another instance of its message id (``stale``:
        replayed, or read after the id was freed and used again). What still raises is the
        database's (the loop's concern, :mod:`rms.kafka.ack_consumer`). The batch costs
        three queries whatever its size: its consumers, its messages' topics and creation
        times, and one ``ack_many`` (a statement per round of distinct message ids)."""
        rejected = _Rejections()
        by_consumer = _by_consumer(records, rejected)
        apps = await self.apps.get_many(by_consumer)
        signed: dict[str, list[tuple[AckClaim, AckRecord]]] = {}
        for consumer, acks in by_consumer.items():
            app = apps.get(consumer)
            if app is None:
                rejected.add("unknown-consumer", len(acks), consumer)
            else:
                signed[consumer] = self._signed(app, acks, rejected)
        targets = await self.subscriptions.ack_targets(
            [claim.message_id for acks in signed.values() for claim, _ in acks])
        allowed: list[AckItem] = []
        for consumer, acks in signed.items():
            for claim, _ in acks:
                problem = total(partial(_target_problem, apps[consumer], claim,
                                        targets.get(claim.message_id)))
                if problem is None:
                    allowed.append(AckItem(claim.message_id, consumer, "ack-topic",
                                           claim.created_at))
                else:
                    rejected.add(problem, 1, consumer)
        recorded = await self.subscriptions.ack_many(allowed)
        metrics.ACKS.labels("ack-topic").inc(len(recorded))
        missed = [item for item in allowed if item.message_id not in set(recorded)]
        if missed:
            recorded += await self._unrecorded_records(missed)
        rejected.report()
        return len(recorded)

    async def _unrecorded_records(self, items: list[AckItem]) -> list[str]:
        """Count the allowed ack records that recorded nothing, by why; those the rows say
        should have counted (apps an earlier release wrote) are applied once more after a
        repair. Returns the ids recorded on that second try."""
        rows = await self.messages.get_many([item.message_id for item in items])
        again = [item for item in items if item.message_id in rows
                 and unrecorded(rows[item.message_id], item.consumer) is None]
        retried: list[str] = []
        if again and await repair_consume_regexes(self.apps):
            retried = await self.subscriptions.ack_many(again)
            metrics.ACKS.labels("ack-topic").inc(len(retried))
            rows |= await self.messages.get_many([item.message_id for item in again])
        for item in items:
            row = rows.get(item.message_id)
            if item.message_id not in retried and row is not None:
                _not_recorded("ack-topic", row, item.consumer)
        return retried

    def _signed(self, app: App, acks: list[tuple[AckClaim, AckRecord]],
                rejected: _Rejections) -> list[tuple[AckClaim, AckRecord]]:
        secrets = [s for s in (app.signing_secret, app.previous_signing_secret) if s]
        required = self.settings.ack_signatures == "required"
        kept = []
        for claim, record in acks:
            problem = signature_problem(record, secrets, required=required)
            if problem is None:
                kept.append((claim, record))
            else:
                rejected.add(problem, 1, app.name)
        return kept


def _not_recorded(via: str, message: Message, consumer: str) -> Outcome:
    """Why ``consumer``'s ack of ``message`` recorded nothing, counted."""
    reason = unrecorded(message, consumer)
    if reason is None:
        reason = NOT_RECORDED
        log.warning("acks.not_recorded", message_id=message.message_id, consumer=consumer,
                    via=via)
    metrics.ACKS_NOT_RECORDED.labels(via, reason).inc()
    return reason


def _target_problem(app: App, claim: AckClaim, target: AckTarget | None) -> Rejection | None:
    """None when ``app`` may acknowledge the stored message ``claim`` names, the instance the
    claim was written for."""
    if target is None or not may_ack(app, target.topic):
        return "not-permitted-or-unknown"
    return None if written_for(claim, target.created_at) else "stale"


def _by_consumer(records: Iterable[AckRecord],
                 rejected: _Rejections) -> dict[str, list[tuple[AckClaim, AckRecord]]]:
    """The well-formed records grouped by the app they name; the rest counted by reason."""
    grouped: dict[str, list[tuple[AckClaim, AckRecord]]] = defaultdict(list)
    for record in records:
        claim = claim_of(record)
        if isinstance(claim, AckClaim):
            grouped[claim.consumer].append((claim, record))
        else:
            rejected.add(claim, 1)
    return grouped


@dataclass
class _Rejections:
    """The records of one batch that changed nothing, by reason, and the apps they named."""

    counts: Counter[Rejection] = field(default_factory=Counter)
    consumers: set[str] = field(default_factory=set)

    def add(self, reason: Rejection, count: int, consumer: str | None = None) -> None:
        if count:
            self.counts[reason] += count
            if consumer is not None:
                self.consumers.add(consumer)

    def report(self) -> None:
        """Count each rejection by reason, and log the batch's rejections as one line (a flood
        of junk records writes one line per batch, not one per record)."""
        for reason, count in self.counts.items():
            metrics.ACKS_REJECTED.labels(reason).inc(count)
        if self.counts:
            log.warning("ack_consumer.rejected", count=sum(self.counts.values()),
                        reasons=dict(sorted(self.counts.items())),
                        consumers=sorted(self.consumers)[:_LOGGED_CONSUMERS])
