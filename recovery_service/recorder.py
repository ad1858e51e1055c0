"""Group commit for publish bookkeeping.

The recovery worker publishes a whole batch through :class:`rms.delivery.Dispatcher` (the one
publish path), but writing each outcome with its own transaction would cap a worker at a few
thousand re-publishes per second. :class:`BatchedDeliveries` is a drop-in for the dispatcher's
:class:`~rms.store.deliveries.DeliveryStore` that only notes each outcome; the worker then
takes a batch's outcomes and writes them all with a constant number of statements
(:class:`~rms.store.redeliveries.RedeliveryStore`), while it already publishes the next batch.

A worker that dies between a publish and that write leaves the claimed rows at their lease, so
they come due again and are published once more: at-least-once, as everywhere in RMS.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from rms.domain.models import PublishOutcome
from rms.store.deliveries import DeliveryStore
from rms.store.redeliveries import Accepted, Failed, RedeliveryStore


@dataclass(frozen=True, slots=True)
class Outcomes:
    accepted: list[Accepted]
    failed: list[Failed]


class BatchedDeliveries(DeliveryStore):
    def __init__(self, engine: AsyncEngine) -> None:
        super().__init__(engine)
        self._store = RedeliveryStore(engine)
        self._accepted: list[Accepted] = []
        self._failed: list[Failed] = []

    async def record_accepted(
        self, outcome: PublishOutcome, actor: str, next_due_seconds: float | None
    ) -> None:
        if next_due_seconds is None:  # the confirm path never comes here; keep its meaning
            await super().record_accepted(outcome, actor, None)
            return
        self._accepted.append(
            Accepted(outcome.message_id, outcome.delivery, next_due_seconds, actor))

    async def record_failed(self, outcome: PublishOutcome, actor: str, retry_seconds: float) -> None:
        self._failed.append(
            Failed(outcome.message_id, outcome.delivery, outcome.error, retry_seconds, actor))

    def take(self) -> Outcomes:
        """Every outcome noted so far (and forget them), for :meth:`write`."""
        outcomes = Outcomes(self._accepted, self._failed)
        self._accepted, self._failed = [], []
        return outcomes

    async def write(self, outcomes: Outcomes) -> int:
        """Write outcomes with a constant number of statements. Returns how many."""
        await self._store.record_accepted_many(outcomes.accepted)
        await self._store.record_failed_many(outcomes.failed)
        return len(outcomes.accepted) + len(outcomes.failed)

    async def flush(self) -> int:
        """Write every outcome noted so far."""
        return await self.write(self.take())
