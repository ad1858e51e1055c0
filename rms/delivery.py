"""The one publish path: producer confirm, check-back confirm, one-shot send, recovery
re-delivery and admin resend all hand a message whose delivery number is reserved to
:meth:`Dispatcher.deliver`."""

from __future__ import annotations

import structlog

from rms import metrics
from rms.domain.models import Message, PublishOutcome
from rms.domain.policy import DeliveryPolicy, ack_deadline
from rms.kafka.publisher import Publisher, PublishError
from rms.kafka.records import build_record
from rms.store.deliveries import DeliveryStore

log = structlog.get_logger(__name__)


class Dispatcher:
    def __init__(self, publisher: Publisher, store: DeliveryStore, retry_seconds: float,
                 backoff_cap_seconds: float) -> None:
        self._publisher = publisher
        self._store = store
        self._retry_seconds = retry_seconds
        self._cap = backoff_cap_seconds

    async def deliver(self, message: Message, *, actor: str, reschedule: bool) -> PublishOutcome:
        """Publish delivery number ``message.delivery_count`` and record the broker's answer.

        ``reschedule``: set the ack deadline after an accepted publish (recovery, resend); the
        confirm path set it already in the confirming statement.
        """
        delivery = message.delivery_count
        try:
            await self._publisher.publish(build_record(message, delivery))
        except PublishError as exc:
            outcome = PublishOutcome(message.message_id, delivery, ok=False, error=str(exc))
            metrics.PUBLISH_FAILURES.inc()
            log.warning("publish.failed", message_id=message.message_id, app=message.app,
                        topic=message.topic, attempt=delivery, error=str(exc))
            await self._store.record_failed(outcome, actor, self._retry_seconds)
            return outcome
        outcome = PublishOutcome(message.message_id, delivery, ok=True)
        metrics.PUBLISHES.inc()
        due = self._ack_deadline(message) if reschedule else None
        await self._store.record_accepted(outcome, actor, due)
        return outcome

    def _ack_deadline(self, message: Message) -> float:
        policy = DeliveryPolicy(ack_timeout_seconds=message.ack_timeout_seconds,
                                delivery_backoff_cap_seconds=self._cap)
        return ack_deadline(policy, max(1, message.deliveries_in_budget))
