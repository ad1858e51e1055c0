"""W3C Trace Context (https://www.w3.org/TR/trace-context/): the ``traceparent`` and
``tracestate`` values a message carries from its producer's request to the Kafka record, the
check-back call and the consumer's ack.

Parsing follows the spec's rules for a receiver: an invalid ``traceparent`` is ignored (and its
``tracestate`` with it), an invalid ``tracestate`` is dropped on its own; neither is ever an
error. A valid value is kept in its version ``00`` form, the version RMS propagates.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
MAX_TRACESTATE_MEMBERS = 32

_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_KEY = r"(?:[a-z][_0-9a-z\-*/]{0,255}|[a-z0-9][_0-9a-z\-*/]{0,240}@[a-z][_0-9a-z\-*/]{0,13})"
_VALUE = r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
_MEMBER = re.compile(rf"({_KEY})=({_VALUE})")


@dataclass(frozen=True, slots=True)
class TraceContext:
    """A valid ``traceparent`` (version 00 form) and, when one came with it, a valid
    ``tracestate``."""

    traceparent: str
    tracestate: str | None = None

    @property
    def trace_id(self) -> str:
        return self.traceparent[3:35]

    def headers(self) -> dict[str, str]:
        """The context as the W3C headers (HTTP headers or Kafka record headers)."""
        found = {TRACEPARENT: self.traceparent}
        if self.tracestate:
            found[TRACESTATE] = self.tracestate
        return found


def parse_traceparent(value: str | None) -> str | None:
    """``value`` in its version 00 form, or None when it is not a valid ``traceparent``."""
    if value is None:
        return None
    text = value.strip(" \t")
    found = _TRACEPARENT.match(text)
    if found is None:
        return None
    version, trace_id, parent_id, flags = found.groups()
    if version == "ff" or trace_id == "0" * 32 or parent_id == "0" * 16:
        return None
    if version == "00" and len(text) != 55:
        return None
    if len(text) > 55 and text[55] != "-":  # a later version may append fields after a dash
        return None
    return f"00-{trace_id}-{parent_id}-{flags}"


def parse_tracestate(values: Iterable[str]) -> str | None:
    """The combined ``tracestate`` of one or more header values (joined with commas, empty
    members dropped), or None when it is empty or invalid (a malformed member, a key twice,
    more than 32 members)."""
    members = [member.strip(" \t") for value in values for member in value.split(",")]
    members = [member for member in members if member]
    if not members or len(members) > MAX_TRACESTATE_MEMBERS:
        return None
    keys: set[str] = set()
    for member in members:
        found = _MEMBER.fullmatch(member)
        if found is None or found.group(1) in keys:
            return None
        keys.add(found.group(1))
    return ",".join(members)


def trace_context(traceparent: Iterable[str], tracestate: Iterable[str] = ()) -> TraceContext | None:
    """The context of a request or record from its header values (a header may come more than
    once); None when there is no single valid ``traceparent``."""
    parents = list(traceparent)
    if len(parents) != 1:
        return None
    parent = parse_traceparent(parents[0])
    if parent is None:
        return None
    return TraceContext(parent, parse_tracestate(tracestate))


def stored(traceparent: str | None, tracestate: str | None) -> TraceContext | None:
    """The context of a stored message (columns written from a parsed context)."""
    if traceparent is None:
        return None
    return TraceContext(traceparent, tracestate)
