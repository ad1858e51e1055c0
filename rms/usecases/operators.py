"""Operator use cases (admin token over HTTP, ``rms dead`` through it): apps and their
credentials, message search across apps, and the counts the dashboard and alerts read."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rms.callback_urls import validate_prefix
from rms.config import Settings
from rms.domain.apps import AppSpec, Credentials, DeliverySettings
from rms.domain.errors import Invalid
from rms.domain.listings import ConsumerBacklog, MessageFilter
from rms.domain.models import App, Message
from rms.domain.states import State
from rms.domain.topics import names_reserved_topic
from rms.store.admin import (
    AdminStore,
    BlockedKey,
    BlockedPublishes,
    GroupCounts,
)
from rms.store.apps import AppStore
from rms.store.subscriptions.store import SubscriptionStore


@dataclass(frozen=True, slots=True)
class Stats:
    """Counts by state and dead in total and per app and topic, the oldest ages, and the
    publishes blocked on the cluster."""

    totals: dict[str, int]
    oldest_pending_send_age_seconds: float | None
    oldest_unacked_age_seconds: float | None
    groups: list[GroupCounts]
    publish_blocked: list[BlockedPublishes]
    blocked_keys: list[BlockedKey]
    consumers: list[ConsumerBacklog]


@dataclass
class Operators:
    settings: Settings
    apps: AppStore
    admin: AdminStore
    subscriptions: SubscriptionStore

    async def create_app(self, spec: AppSpec) -> Credentials:
        """Register an app; its check-URL prefixes and default check URL are validated, and
        its produce topics may not name a reserved topic (the ack topic, Kafka's ``__*``)."""
        self._check_produce_topics(spec.produce_topics)
        prefixes = tuple(validate_prefix(prefix) for prefix in spec.check_url_prefixes)
        default = (None if spec.default_check_url is None
                   else validate_prefix(spec.default_check_url))
        return await self.apps.create(AppSpec(spec.name, spec.produce_topics,
                                              spec.consume_topics, prefixes, default,
                                              spec.ordered_topics, spec.delivery))

    def _check_produce_topics(self, patterns: Iterable[str]) -> None:
        named = [p for p in patterns if names_reserved_topic(p, self.settings.ack_topic)]
        if named:
            raise Invalid(f"produce_topics names reserved topics {named!r}: the ack topic "
                          f"({self.settings.ack_topic!r}, RMS_ACK_TOPIC) and Kafka's internal "
                          "'__' topics are never produced to through RMS")

    async def list_apps(self) -> list[App]:
        return await self.apps.list()

    async def app(self, name: str) -> App:
        return await self.apps.get(name)

    async def set_ordered_topics(self, name: str, patterns: tuple[str, ...]) -> App:
        """Which of the app's topics are published in confirm order per key (glob patterns);
        messages already prepared keep the ordering they were prepared with."""
        return await self.apps.set_ordered_topics(name, patterns)

    async def set_delivery(self, name: str, settings: DeliverySettings) -> App:
        """The app's own delivery settings as a consumer (design section 7); messages already
        confirmed keep the settings they were confirmed with."""
        return await self.apps.set_delivery(name, settings)

    async def set_consume_topics(self, name: str, patterns: tuple[str, ...]) -> App:
        """Replace the app's consume topics (glob patterns): messages confirmed from now on
        take them as their subscribers; the app is released from the ``sent`` messages it owes
        whose topic they no longer match (design section 3)."""
        await self.subscriptions.set_consume_topics(name, patterns)
        return await self.apps.get(name)

    async def delete_app(self, name: str) -> int:
        """Delete an app, releasing it from every message it owes; returns how many. Refused
        (409) while messages or transactions of its own are stored."""
        return await self.subscriptions.delete_app(name)

    async def search(self, where: MessageFilter, limit: int, cursor: str | None
                     ) -> tuple[list[Message], str | None]:
        """Messages of any app matching ``where``, oldest first, a page at a time."""
        return await self.admin.search(where, limit, cursor)

    async def rotate_key(self, name: str, *, rotate_signing_secret: bool) -> Credentials:
        return await self.apps.rotate_key(
            name, rotate_signing_secret=rotate_signing_secret,
            overlap_seconds=self.settings.signing_secret_overlap_seconds)

    async def rotate_signing_secret(self, name: str, overlap_seconds: float | None) -> App:
        """A new signing secret; the previous one signs too for ``overlap_seconds`` (default
        RMS_SIGNING_SECRET_OVERLAP_SECONDS)."""
        overlap = (self.settings.signing_secret_overlap_seconds if overlap_seconds is None
                   else overlap_seconds)
        return await self.apps.rotate_signing_secret(name, overlap)

    async def stats(self) -> Stats:
        groups = await self.admin.stats()
        totals: dict[str, int] = {s.value: 0 for s in State} | {"dead": 0, "scheduled": 0}
        for group in groups:
            for name, count in group.counts.items():
                totals[name] = totals.get(name, 0) + count
        return Stats(
            totals=totals,
            oldest_pending_send_age_seconds=_oldest(
                g.oldest_pending_send_age_seconds for g in groups),
            oldest_unacked_age_seconds=_oldest(g.oldest_unacked_age_seconds for g in groups),
            groups=groups,
            publish_blocked=await self.admin.blocked_publishes(),
            blocked_keys=await self.admin.blocked_keys(),
            consumers=await self.subscriptions.consumer_backlogs(),
        )


def _oldest(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None
