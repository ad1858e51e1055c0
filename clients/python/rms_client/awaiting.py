"""The ``rms-awaiting`` header (design section 6): the subscribers of a message that had not
acknowledged it when RMS published the record, as comma-separated app names. A consumer whose
app the header does not name acknowledged the message already: it skips the record (no
handler, no database, no ack).

Reading the header is total and never skips on doubt: a header that is missing, repeated,
empty, not UTF-8, or holds anything but app names (spaces around a name are allowed) reads as
not known, and the record is handled as one without the header.
"""

from __future__ import annotations

from collections.abc import Iterable

from rms_client.ids import is_valid_app_name

HEADER_AWAITING = "rms-awaiting"
_SPACES = " \t"


def awaiting_of(headers: Iterable[tuple[str, bytes | None]] | None) -> frozenset[str] | None:
    """The app names of a record's one ``rms-awaiting`` header, or None when the record has
    none or it cannot be read (never raises)."""
    try:
        values = [raw for name, raw in headers or () if name == HEADER_AWAITING]
        if len(values) != 1 or values[0] is None:
            return None
        names = [part.strip(_SPACES) for part in values[0].decode("utf-8").split(",")]
    except Exception:  # whatever the headers hold: not known, so the record is handled
        return None
    if not all(is_valid_app_name(name) for name in names):
        return None
    return frozenset(names)


def awaits(awaiting: frozenset[str] | None, app: str) -> bool:
    """Whether a record is for ``app``: yes unless its header was read and does not name it."""
    return awaiting is None or app in awaiting
