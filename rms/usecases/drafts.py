"""A prepare request checked against its app's permissions and the deployment's limits, and
turned into a :class:`~rms.domain.models.NewMessage` with the policy resolved."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

import orjson

from rms.callback_urls import PassedHosts, validate_check_url
from rms.config import Settings
from rms.domain.errors import Forbidden, Invalid, PayloadTooLarge
from rms.domain.models import App, NewMessage
from rms.domain.topics import is_reserved_topic, may_produce, topic_allowed
from rms.kafka.records import RESERVED_HEADER_PREFIX
from rms_client.ids import new_message_id

T = TypeVar("T")
# the check URLs one request validated already, as given -> as stored (normalised)
CheckedUrls = dict[str, str]


class ContentInput(Protocol):
    """A message without its check-back fields (a message of a transaction is one)."""

    @property
    def message_id(self) -> str | None: ...
    @property
    def topic(self) -> str: ...
    @property
    def key(self) -> str | None: ...
    @property
    def payload(self) -> Any: ...
    @property
    def headers(self) -> dict[str, str]: ...
    @property
    def ack_timeout_seconds(self) -> float | None: ...
    @property
    def max_deliveries(self) -> int | None: ...
    @property
    def deliver_after(self) -> datetime | None: ...
    @property
    def delay_seconds(self) -> float | None: ...


class CheckBackInput(Protocol):
    """The check-back fields of a prepare (or of a transaction of several messages)."""

    @property
    def check_url(self) -> str | None: ...
    @property
    def check_after_seconds(self) -> float | None: ...
    @property
    def max_checks(self) -> int | None: ...


class PrepareInput(ContentInput, CheckBackInput, Protocol):
    """What a prepare carries, whatever transport it came by (the HTTP schema is one)."""


@dataclass
class Drafts:
    settings: Settings
    passed_hosts: PassedHosts = field(default_factory=PassedHosts)

    async def draft(self, app: App, request: PrepareInput) -> NewMessage:
        """Validate a prepare against the app's permissions and the limits."""
        return await self.draft_content(app, request, request)

    async def draft_content(self, app: App, content: ContentInput, checkback: CheckBackInput,
                            urls: CheckedUrls | None = None) -> NewMessage:
        """Validate a message's ``content`` with the ``checkback`` fields it is stored with
        (its own for a prepare, its transaction's for a message of a transaction).
        ``urls``: the check URLs already validated for the same app in this request."""
        self._check_topic(app, content.topic)
        self._check_payload(content, checkback)
        _check_key(content.key)
        self._check_headers(content.headers)
        self._check_delay(content)
        check_url = await self._check_url(app, checkback.check_url, urls)
        policy = self.settings.policy
        return NewMessage(
            message_id=content.message_id or new_message_id(),
            topic=content.topic,
            key=content.key,
            payload=content.payload,
            headers=content.headers,
            check_url=check_url,
            check_after_seconds=_pick(checkback.check_after_seconds, policy.check_after_seconds),
            max_checks=_pick(checkback.max_checks, policy.max_checks),
            ack_timeout_seconds=_pick(content.ack_timeout_seconds, policy.ack_timeout_seconds),
            max_deliveries=_pick(content.max_deliveries, policy.max_deliveries),
            deliver_after=content.deliver_after,
            delay_seconds=content.delay_seconds,
            ordered=is_ordered(app, content.topic, content.key),
        )

    async def draft_item(self, app: App, index: int, content: ContentInput,
                         checkback: CheckBackInput, urls: CheckedUrls | None = None
                         ) -> NewMessage:
        """:meth:`draft_content` for an item of a batch or a transaction: a refusal names the
        item."""
        try:
            return await self.draft_content(app, content, checkback, urls)
        except (Forbidden, Invalid, PayloadTooLarge) as exc:
            raise type(exc)(f"messages[{index}]: {exc.detail}") from exc

    async def _check_url(self, app: App, given: str | None, urls: CheckedUrls | None) -> str:
        """The check URL to store: ``given`` or the app's default, validated (once per
        request when ``urls`` keeps what was validated)."""
        check_url = given or app.default_check_url
        if check_url is None:
            raise Invalid("check_url is required (the app has no default_check_url)")
        if urls is not None and (known := urls.get(check_url)) is not None:
            return known
        checked = await validate_check_url(check_url, app.check_url_prefixes,
                                           allow_private=self.settings.allow_private_callbacks,
                                           passed=self.passed_hosts)
        if urls is not None:
            urls[check_url] = checked
        return checked

    def _check_topic(self, app: App, topic: str) -> None:
        ack_topic = self.settings.ack_topic
        if may_produce(topic, app.produce_topics, ack_topic):
            return
        if is_reserved_topic(topic, ack_topic):
            raise Forbidden(f"topic {topic!r} is reserved (the ack topic RMS_ACK_TOPIC and "
                            "Kafka's internal '__' topics): no app produces to it")
        raise Forbidden(f"topic {topic!r} is not in app {app.name!r}'s produce_topics")

    def check_batch_size(self, count: int) -> None:
        if count > self.settings.max_batch_items:
            raise PayloadTooLarge(f"a batch holds at most {self.settings.max_batch_items} "
                                  f"items; this one has {count}")

    def _check_payload(self, content: ContentInput, checkback: CheckBackInput) -> None:
        encoded = orjson.dumps(content.payload)  # encodable: the transport checked it
        if len(encoded) > self.settings.max_payload_bytes:
            raise PayloadTooLarge(f"payload is {len(encoded)} bytes; the limit is "
                                  f"{self.settings.max_payload_bytes} (RMS_MAX_PAYLOAD_BYTES)")
        if _ENCODED_NUL.search(encoded):
            raise Invalid(_NUL)
        if any("\x00" in text for text in (content.key or "", checkback.check_url or "")):
            raise Invalid(_NUL)

    def _check_delay(self, request: ContentInput) -> None:
        """At most one way to delay, and no further ahead than RMS_MAX_DELAY_SECONDS (a time in
        the past means no delay)."""
        limit = self.settings.max_delay_seconds
        if request.deliver_after is not None and request.delay_seconds is not None:
            raise Invalid("give deliver_after or delay_seconds, not both")
        if request.delay_seconds is not None and request.delay_seconds > limit:
            raise Invalid(f"delay_seconds is {request.delay_seconds:g}; the limit is {limit:g} "
                          "(RMS_MAX_DELAY_SECONDS)")
        if request.deliver_after is not None:
            ahead = (request.deliver_after - datetime.now(UTC)).total_seconds()
            if ahead > limit:
                raise Invalid(f"deliver_after is {ahead:.0f} s ahead; the limit is {limit:g} s "
                              "(RMS_MAX_DELAY_SECONDS)")

    def _check_headers(self, headers: dict[str, str]) -> None:
        if len(headers) > self.settings.max_headers:
            raise Invalid(f"at most {self.settings.max_headers} headers are allowed; "
                          f"got {len(headers)}")
        if any("\x00" in name or "\x00" in value for name, value in headers.items()):
            raise Invalid(_NUL)
        for name in headers:
            if not name or name.lower().startswith(RESERVED_HEADER_PREFIX):
                raise Invalid(f"header name {name!r} is empty or uses the reserved "
                              f"'{RESERVED_HEADER_PREFIX}' prefix")
        size = sum(len(k.encode()) + len(v.encode()) for k, v in headers.items())
        if size > self.settings.max_header_bytes:
            raise Invalid(f"headers total {size} bytes; the limit is "
                          f"{self.settings.max_header_bytes}")


# a JSON escape \u0000 (an even number of backslashes before it, so not the text "\\u0000")
_ENCODED_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")
_NUL = ("the NUL character (\\u0000) cannot be stored (PostgreSQL text and jsonb refuse it); "
        "payload, key, headers and check_url must not contain it")


MAX_KEY_BYTES = 1024


def _check_key(key: str | None) -> None:
    """A key is indexed with its topic (per-key ordering), and an index row holds at most
    about 2.7 kB: the limit is in bytes, so 1,024 four-byte characters are refused too."""
    size = len(key.encode()) if key is not None else 0
    if size > MAX_KEY_BYTES:
        raise Invalid(f"key is {size} bytes in UTF-8; the limit is {MAX_KEY_BYTES} bytes")


def is_ordered(app: App, topic: str, key: str | None) -> bool:
    """Whether a message is published in confirm order per key: it has a key and its topic
    matches one of the app's ``ordered_topics`` (decided once, when it is prepared)."""
    return key is not None and topic_allowed(topic, app.ordered_topics)


def _pick(override: T | None, default: T) -> T:
    return default if override is None else override


def first_duplicate(ids: list[str]) -> tuple[str, int] | None:
    """The first id that appears a second time, with that position."""
    seen: set[str] = set()
    for index, message_id in enumerate(ids):
        if message_id in seen:
            return message_id, index
        seen.add(message_id)
    return None
