"""An app's registration as the operator asks for it, and the credentials shown once."""

from __future__ import annotations

from dataclasses import dataclass

from rms.domain.models import App


@dataclass(frozen=True, slots=True)
class DeliverySettings:
    """A consumer app's own delivery settings (design section 7): the deliveries of a message
    it is owed and how long each waits for its ack. None: the message's."""

    max_deliveries: int | None = None
    ack_timeout_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class AppSpec:
    name: str
    produce_topics: tuple[str, ...]
    consume_topics: tuple[str, ...]
    check_url_prefixes: tuple[str, ...]
    default_check_url: str | None = None
    ordered_topics: tuple[str, ...] = ()
    delivery: DeliverySettings = DeliverySettings()


@dataclass(frozen=True, slots=True)
class Credentials:
    """Shown once, at creation or rotation."""

    app: App
    api_key: str
    signing_secret: str
