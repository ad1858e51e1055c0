"""Readiness and the gauges read at scrape time."""

from __future__ import annotations

from dataclasses import dataclass

from rms import metrics
from rms.kafka.publisher import KafkaPublisher, broker_reachable
from rms.store.admin import AdminStore
from rms.store.subscriptions.store import SubscriptionStore


@dataclass
class Health:
    admin: AdminStore
    publisher: KafkaPublisher
    subscriptions: SubscriptionStore

    async def unreachable(self) -> list[str]:
        """The dependencies that do not answer: ``database``, ``broker`` (empty: ready)."""
        database = await self.admin.reachable()
        broker = await broker_reachable(self.publisher)
        return [name for name, ok in (("database", database), ("broker", broker)) if not ok]

    async def refresh_gauges(self) -> None:
        """Ages of the oldest pending-send and unacknowledged messages (partial indexes), what
        each consumer app owes, and what the retention job recorded (one row)."""
        pending, unacked = await self.admin.oldest_ages()
        metrics.OLDEST_PENDING_SEND.set(pending or 0)
        metrics.OLDEST_UNACKED.set(unacked or 0)
        backlogs = await self.subscriptions.consumer_backlogs()
        metrics.CONSUMER_UNACKED.clear()
        metrics.CONSUMER_OLDEST_UNACKED.clear()
        metrics.CONSUMER_SECONDS_SINCE_ACK.clear()
        for backlog in backlogs:
            metrics.CONSUMER_UNACKED.labels(backlog.consumer).set(backlog.unacked)
            metrics.CONSUMER_OLDEST_UNACKED.labels(backlog.consumer).set(
                backlog.oldest_unacked_age_seconds or 0)
            if backlog.seconds_since_ack is not None:
                metrics.CONSUMER_SECONDS_SINCE_ACK.labels(backlog.consumer).set(
                    backlog.seconds_since_ack)
        metrics.RETENTION.figures = await self.admin.retention_figures()
