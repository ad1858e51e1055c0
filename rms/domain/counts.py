"""Counts in the one-line summaries the commands print: "1 message", "2 messages"."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, in the plural (``noun + "s"`` unless given) unless it is one."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
