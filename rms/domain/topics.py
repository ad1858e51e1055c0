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


# the characters a valid topic is made of (:data:`TOPIC_PATTERN`)
_TOPIC_ALPHABET = ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def consume_regex(patterns: Iterable[str]) -> str | None:
    """One anchored POSIX regular expression (PostgreSQL's ``~``) that a valid topic matches
    exactly when :func:`topic_allowed` says one of the glob ``patterns`` matches it; None when
    no valid topic can match (no patterns). The database decides who subscribes to a message
    with it (design section 3), so it must agree with ``fnmatchcase`` on every valid topic:
    each bracket expression is written out as the topic characters it matches, which
    ``fnmatchcase`` itself decides, so no corner of the glob syntax is translated by hand."""
    alternatives = sorted({regex for regex in map(_glob_regex, patterns) if regex is not None})
    if not alternatives:
        return None
    return "^(" + "|".join(alternatives) + ")$"


def _glob_regex(pattern: str) -> str | None:
    """The regex of one glob over valid topics (None: it matches none), read the way
    :mod:`fnmatch` reads it."""
    parts: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            parts.append(".*")
        elif c == "?":
            parts.append(".")
        elif c == "[" and (end := _bracket_end(pattern, i)) is not None:
            chars = [ch for ch in _TOPIC_ALPHABET if fnmatchcase(ch, pattern[i - 1:end + 1])]
            if not chars:
                return None
            parts.append(_bracket(chars))
            i = end + 1
        elif c in _TOPIC_ALPHABET:
            parts.append("\\" + c if c == "." else c)
        else:
            return None  # a character no valid topic contains
    return "".join(parts)


def _bracket_end(pattern: str, start: int) -> int | None:
    """The index of the ``]`` closing a bracket expression opened just before ``start``
    (None: unclosed, so ``[`` is a literal), by :func:`fnmatch.translate`'s rule."""
    j = start
    if j < len(pattern) and pattern[j] == "!":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 1
    return j if j < len(pattern) else None


def _bracket(chars: list[str]) -> str:
    """A bracket expression of topic characters (``-`` last, where it is literal)."""
    dash = "-" if "-" in chars else ""
    return "[" + "".join(ch for ch in chars if ch != "-") + dash + "]"


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
