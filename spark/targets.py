"""SLA targets: how long after confirmation a message of a topic should be done.

The file (``--targets FILE``) is TOML or JSON (chosen by the ``.json`` suffix, TOML otherwise)::

    default_seconds = 60          # every topic no pattern matches

    [topics]                      # glob patterns (fnmatch: * ? [...]), first match wins
    "orders.paid" = 10
    "orders.*" = 30

Patterns are tried in file order and the first that matches wins, so put exact names and
narrow patterns before broad ones. Without a file every topic gets ``DEFAULT_SECONDS``: a
message that is not acknowledged within the default ack timeout (60 s) needed a redelivery,
which is the first thing an SLA should flag.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from history.options import UsageError

DEFAULT_SECONDS = 60.0


@dataclass(frozen=True)
class SlaTargets:
    default_seconds: float = DEFAULT_SECONDS
    patterns: tuple[tuple[str, float], ...] = field(default_factory=tuple)

    def target_for(self, topic: str) -> float:
        for pattern, seconds in self.patterns:
            if fnmatchcase(topic, pattern):
                return seconds
        return self.default_seconds

    def as_json(self) -> dict[str, Any]:
        return {
            "default_seconds": self.default_seconds,
            "topics": [{"pattern": p, "seconds": s} for p, s in self.patterns],
        }


def load_targets(path: Path | None) -> SlaTargets:
    """Read and validate a targets file; every problem is a ``UsageError`` naming the file."""
    if path is None:
        return SlaTargets()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--targets {path}: cannot read ({exc.strerror})") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"--targets {path}: not valid {_kind(path)} ({exc})") from None
    return _parse(data, f"--targets {path}")


def _kind(path: Path) -> str:
    return "JSON" if path.suffix == ".json" else "TOML"


def _parse(data: object, where: str) -> SlaTargets:
    if not isinstance(data, dict):
        raise UsageError(f"{where}: expected a table with default_seconds and topics")
    unknown = set(data) - {"default_seconds", "topics"}
    if unknown:
        raise UsageError(f"{where}: unknown keys {sorted(unknown)}")
    default = _seconds(data.get("default_seconds", DEFAULT_SECONDS), f"{where}: default_seconds")
    topics = data.get("topics", {})
    if not isinstance(topics, dict):
        raise UsageError(f"{where}: topics must map topic patterns to seconds")
    patterns = tuple(
        (str(pattern), _seconds(value, f"{where}: topics.{pattern}"))
        for pattern, value in topics.items()
    )
    return SlaTargets(default_seconds=default, patterns=patterns)


def _seconds(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UsageError(f"{where}: expected a number of seconds, got {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(f"{where}: must be a positive number of seconds, got {value!r}")
    return seconds
