"""Acknowledgements, over HTTP and the ack topic alike: one rule decides who may acknowledge a
message (:func:`may_ack`), and both paths mark it ``done`` through the ACK transition.

An ack-topic record counts only when ``consumer`` names an app whose ``consume_topics`` cover
the message's topic and (when signatures are required) it carries that app's signature;
anything else is counted by reason and skipped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import structlog

from rms import metrics
from rms.config import Settings
from rms.domain.errors import Forbidden, NotFound
from rms.domain.models import App, Message
from rms.domain.topics import topic_allowed
from rms.kafka.ack_records import AckRecord, Rejection, parse_ack, signature_problem
from rms.store.apps import AppStore
from rms.store.messages import ACK, MessageStore

log = structlog.get_logger(__name__)


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
            message_id, ACK, app=None, actor=f"app:{app.name}", detail={"via": "http"})
        if changed:
            metrics.ACKS.labels("http").inc()
        return message

    async def apply_records(self, records: Iterable[AckRecord]) -> int:
        """Apply a batch of ack-topic records; returns how many messages became ``done``."""
        by_consumer: dict[str, list[tuple[str, AckRecord]]] = defaultdict(list)
        for record in records:
            parsed = parse_ack(record.value)
            if parsed is None:
                _reject("malformed")
                continue
            by_consumer[parsed[1]].append((parsed[0], record))
        applied = 0
        for consumer, acks in by_consumer.items():
            ids = await self._permitted(consumer, acks)
            done = await self.messages.ack_many(ids, actor=f"app:{consumer}", via="ack-topic")
            metrics.ACKS.labels("ack-topic").inc(len(done))
            applied += len(done)
        return applied

    async def _permitted(self, consumer: str, acks: list[tuple[str, AckRecord]]) -> list[str]:
        """The ids of ``acks`` that ``consumer`` signed and may acknowledge."""
        try:
            app = await self.apps.get(consumer)
        except NotFound:
            _reject("unknown-consumer", len(acks), consumer=consumer)
            return []
        signed = self._signed(app, acks)
        topics = await self.messages.topics(signed)
        allowed = [i for i, topic in topics.items() if may_ack(app, topic)]
        if len(signed) > len(allowed):
            _reject("not-permitted-or-unknown", len(signed) - len(allowed), consumer=consumer)
        return allowed

    def _signed(self, app: App, acks: list[tuple[str, AckRecord]]) -> list[str]:
        secrets = [s for s in (app.signing_secret, app.previous_signing_secret) if s]
        required = self.settings.ack_signatures == "required"
        ids = []
        for message_id, record in acks:
            problem = signature_problem(record, secrets, required=required)
            if problem is None:
                ids.append(message_id)
            else:
                _reject(problem, consumer=app.name, message_id=message_id)
        return ids


def _reject(reason: Rejection, count: int = 1, **context: str) -> None:
    metrics.ACKS_REJECTED.labels(reason).inc(count)
    log.warning("ack_consumer.rejected", reason=reason, count=count, **context)
