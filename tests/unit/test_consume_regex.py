"""The glob patterns of an app's ``consume_topics`` as one POSIX regular expression: the
database decides a message's subscribers with it, so it must agree with ``fnmatchcase`` (the
permission check of :func:`rms.domain.topics.topic_allowed`) on every valid topic."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from rms.domain.topics import consume_regex, is_valid_topic, topic_allowed

_TOPIC_CHARS = "abcAB.-_019"
_GLOB_CHARS = _TOPIC_CHARS + "*?[]!^\\$()|+{}"
topics = st.text(alphabet=_TOPIC_CHARS, min_size=1, max_size=8).filter(is_valid_topic)
globs = st.lists(st.text(alphabet=_GLOB_CHARS, max_size=8), max_size=3)


def _matches(regex: str | None, topic: str) -> bool:
    return regex is not None and re.search(regex, topic) is not None


@settings(max_examples=400, deadline=None)
@given(globs, st.lists(topics, min_size=1, max_size=6))
def test_the_regex_matches_exactly_the_topics_fnmatchcase_allows(
        patterns: list[str], candidates: list[str]) -> None:
    regex = consume_regex(patterns)
    for topic in candidates + [p for p in patterns if is_valid_topic(p)]:
        assert _matches(regex, topic) == topic_allowed(topic, patterns), (patterns, topic, regex)


def test_an_app_without_consume_topics_has_no_regex() -> None:
    assert consume_regex([]) is None
    assert consume_regex(["orders[", "a b"]) is None  # no valid topic can match these


def test_the_regex_is_anchored_and_reads_dots_literally() -> None:
    regex = consume_regex(["orders.*", "[!a-m]x"])
    assert _matches(regex, "orders.paid") and _matches(regex, "zx")
    assert not _matches(regex, "ordersXpaid") and not _matches(regex, "my.orders.paid")
    assert not _matches(regex, "ax")
