"""Topic permissions: an app may produce to / consume from topics matching its glob patterns."""

from __future__ import annotations

import re
from collections.abc import Iterable
from fnmatch import fnmatchcase

TOPIC_PATTERN = r"^[A-Za-z0-9._-]{1,249}$"
_TOPIC_RE = re.compile(TOPIC_PATTERN)


def is_valid_topic(topic: str) -> bool:
    """Kafka's own rule: 1-249 chars of letters, digits, ``.``, ``_`` and ``-``."""
    return bool(_TOPIC_RE.fullmatch(topic)) and topic not in {".", ".."}


def topic_allowed(topic: str, patterns: Iterable[str]) -> bool:
    return any(fnmatchcase(topic, pattern) for pattern in patterns)


KAFKA_INTERNAL_PREFIX = "__"
_GLOB_CHARACTERS = frozenset("*?[")


def is_reserved_topic(topic: str, ack_topic: str) -> bool:
    """Topics no app may produce to through RMS, whatever its globs: the ack topic (a record
    there, written with RMS's own credentials, could finish any message) and Kafka's internal
    topics (``__consumer_offsets``, ``__transaction_state``, ...)."""
    return topic == ack_topic or topic.startswith(KAFKA_INTERNAL_PREFIX)


def may_produce(topic: str, patterns: Iterable[str], ack_topic: str) -> bool:
    return not is_reserved_topic(topic, ack_topic) and topic_allowed(topic, patterns)


def names_reserved_topic(pattern: str, ack_topic: str) -> bool:
    """A produce pattern that names a reserved topic explicitly: the ack topic spelled out, or
    any pattern beginning with ``__`` (it can match only Kafka's internal topics). A wider glob
    that happens to cover one (``*``, ``rms.*``) is allowed: it never lets a produce through
    (:func:`may_produce`)."""
    explicit = not _GLOB_CHARACTERS.intersection(pattern)
    return (explicit and pattern == ack_topic) or pattern.startswith(KAFKA_INTERNAL_PREFIX)
