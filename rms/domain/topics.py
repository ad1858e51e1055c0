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
