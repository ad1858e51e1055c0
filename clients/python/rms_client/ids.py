"""Message ids: validation of caller ids and generation of time-ordered ones."""

from __future__ import annotations

import os
import re
import time

MESSAGE_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"
_MESSAGE_ID_RE = re.compile(MESSAGE_ID_PATTERN)
APP_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
_APP_NAME_RE = re.compile(APP_NAME_PATTERN)


# ids that would collide with the fixed routes under /v1/messages (batch/confirm, send), and
# the dot segments "." and "..", which HTTP clients that normalise paths (RFC 3986 section
# 5.2.4) remove, so the message could never be addressed as /v1/messages/{id}
RESERVED_MESSAGE_IDS = frozenset({"batch", "send", ".", ".."})


def is_valid_message_id(value: str) -> bool:
    return bool(_MESSAGE_ID_RE.fullmatch(value)) and value not in RESERVED_MESSAGE_IDS


def is_valid_app_name(value: str) -> bool:
    return bool(_APP_NAME_RE.fullmatch(value))


def new_message_id() -> str:
    """A 26-char, time-ordered id (ms timestamp + 80 random bits), so inserts stay index-local."""
    millis = int(time.time() * 1000)
    return f"{millis:013x}{os.urandom(8).hex()[:13]}"
