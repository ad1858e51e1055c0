"""Acknowledgements, over HTTP and the ack topic alike: one rule decides who may acknowledge a
message (:func:`may_ack`), and both paths mark it ``done`` through the ACK transition.

An ack-topic record counts only when ``consumer`` names an app whose ``consume_topics`` cover
the message's topic, (when signatures are required) it carries that app's signature, and it
was written for the message instance that holds the id now (:func:`written_for`); anything
else is counted by reason and skipped.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import structlog

from rms import metrics
from rms.config import Settings
from rms.domain import transitions as table
from rms.domain.errors import Forbidden, NotFound
from rms.domain.models import App, Message
from rms.domain.topics import topic_allowed
from rms.store.apps import AppStore
from rms.store.messages import MessageStore
from rms_client.ack_records import (
    AckClaim,
    AckRecord,
    Rejection,
    parse_ack,
    signature_problem,
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

    async def ack(self, app: App, message_id: str) -> Message:
        """An ack over HTTP: 404 for a message the app can neither see nor consume, 403 for
        its own message on a topic it does not consume; a repeat answers 200."""
        current = await self.messages.get(message_id)
        if not may_ack(app, current.topic):
            if current.app != app.name:
                raise NotFound(f"no message {message_id!r}")
            raise Forbidden(f"topic {current.topic!r} is not in app {app.name!r}'s "
                            "consume_topics")
        message, changed = await self.messages.transition(
            message_id, table.ACK, app=None, actor=f"app:{app.name}", detail={"via": "http"})
        if changed:
            metrics.ACKS.labels("http").inc()
        return message

    async def apply_records(self, records: Iterable[AckRecord]) -> int:
        """Apply a batch of ack-topic records; returns how many messages became ``done``.

        Each record is judged alone: one that is malformed, unsigned, names an unknown app or
        a message its app may not acknowledge is counted and skipped, never raised, so it
        cannot hold back the records after it; so is one written for another instance of its
        message id (``stale``: replayed, or read after the id was freed and used again). The
        batch costs three queries whatever its size: its consumers, its messages' topics and
        creation times, and one ``ack_many`` per consumer."""
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
        targets = await self.messages.ack_targets(
            [claim.message_id for acks in signed.values() for claim, _ in acks])
        applied = 0
        for consumer, acks in signed.items():
            permitted = [(claim, record) for claim, record in acks
                         if (target := targets.get(claim.message_id)) is not None
                         and may_ack(apps[consumer], target.topic)]
            rejected.add("not-permitted-or-unknown", len(acks) - len(permitted), consumer)
            allowed = [claim.message_id for claim, record in permitted
                       if written_for(claim, record, targets[claim.message_id].created_at)]
            rejected.add("stale", len(permitted) - len(allowed), consumer)
            done = await self.messages.ack_many(allowed, actor=f"app:{consumer}", via="ack-topic")
            metrics.ACKS.labels("ack-topic").inc(len(done))
            applied += len(done)
        rejected.report()
        return applied

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


def _by_consumer(records: Iterable[AckRecord],
                 rejected: _Rejections) -> dict[str, list[tuple[AckClaim, AckRecord]]]:
    """The well-formed records grouped by the app they name; the rest counted as malformed."""
    grouped: dict[str, list[tuple[AckClaim, AckRecord]]] = defaultdict(list)
    for record in records:
        claim = parse_ack(record.value)
        if claim is None:
            rejected.add("malformed", 1)
        else:
            grouped[claim.consumer].append((claim, record))
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
