"""The first delivery a confirm gives a message, as a truth table over the delivery phase's
terms it reads (ordered, delayed, member of a transaction): the conditional effects of the
transition table, resolved for each kind of row. A change of the table shows here as a changed
row of the table."""

from __future__ import annotations

import itertools

from rms.domain import phase
from rms.domain import transitions as table

COLUMNS = ("delivery_count", "next_delivery_at", "confirm_seq", "claim_token")

# ordered, delayed (its deliver_after still ahead), member -> the confirm's effects ("owed":
# the setting the message's subscribers are owed, design section 7)
EXPECTED = """
ordered delayed member | delivery_count     | next_delivery_at         | confirm_seq | claim_token
no      no      no     | delivery_count + 1 | now + owed ack_timeout_seconds | NULL        | NULL
no      no      yes    | delivery_count + 1 | now + owed ack_timeout_seconds | NULL        | <token>
no      yes     no     | delivery_count     | deliver_after            | NULL        | NULL
no      yes     yes    | delivery_count     | deliver_after            | NULL        | <token>
yes     no      no     | delivery_count     | now                      | next        | NULL
yes     no      yes    | delivery_count     | now                      | next        | <token>
yes     yes     no     | delivery_count     | deliver_after            | next        | NULL
yes     yes     yes    | delivery_count     | deliver_after            | next        | <token>
"""


def _text(effect: table.Effect) -> str:
    if effect is None:
        return "NULL"
    if isinstance(effect, table.Column):
        return effect.name
    if isinstance(effect, table.Plus):
        return f"{effect.name} + {effect.by}"
    if isinstance(effect, table.Now):
        return "now"
    if isinstance(effect, table.Later) and isinstance(effect.seconds, table.Column):
        return f"now + {effect.seconds.name}"
    if isinstance(effect, table.Later) and isinstance(effect.seconds, table.OwedSetting):
        return f"now + owed {effect.seconds.name}"
    if isinstance(effect, table.NextInSequence):
        return "next"
    if isinstance(effect, table.Given):
        return f"<{effect.name}>"
    return repr(effect)


def _row(ordered: bool, delayed: bool, member: bool) -> list[str]:
    terms = {phase.ORDERED: ordered, phase.SCHEDULED: delayed}
    change = table.CONFIRM_CLAIMED if member else table.CONFIRM
    return [_text(table.chosen(change.effects[column], terms.__getitem__))
            for column in COLUMNS]


def truth_table() -> str:
    """The table as :data:`EXPECTED` prints it."""
    widths = (18, 24, 11, 11)
    header = "ordered delayed member | " + " | ".join(
        column.ljust(width) for column, width in zip(COLUMNS, widths, strict=True))
    lines = [header.rstrip()]
    for ordered, delayed, member in itertools.product((False, True), repeat=3):
        flags = " ".join(("yes" if flag else "no").ljust(width) for flag, width
                         in zip((ordered, delayed, member), (7, 7, 6), strict=True))
        cells = " | ".join(cell.ljust(width) for cell, width
                           in zip(_row(ordered, delayed, member), widths, strict=True))
        lines.append(f"{flags} | {cells}".rstrip())
    return "\n".join(lines)


def _cells(text: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.split("|")] for line in text.strip().splitlines()]


def test_the_confirm_truth_table() -> None:
    printed = truth_table()
    print("\n" + printed)
    assert _cells(printed) == _cells(EXPECTED)


def test_a_one_shot_send_reserves_its_first_delivery_only_when_due_and_unordered() -> None:
    for ordered, delayed in itertools.product((False, True), repeat=2):
        terms = {phase.ORDERED: ordered, phase.SCHEDULED: delayed}
        count = table.chosen(table.SEND.effects["delivery_count"], terms.__getitem__)
        assert count == (0 if ordered or delayed else 1)
