"""Retention's statements (``rms retention run``, run by :mod:`rms.store.retention`): which
messages are finished, and the deletes of finished messages, their events and finished
transactions. The predicates are built from the terminal states of the domain
(:data:`rms.domain.states.TERMINAL_STATES` and the column recording when each was reached), so
a new state is either final here or never removed.

Every statement is asyncpg text with positional binds: ``$1`` is the cutoff where a statement
has one, or the message ids of a batch and ``$2`` its journaled event ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import TypeVar

from rms.domain.states import FINISHED_AT, TERMINAL_STATES
from rms.domain.transactions import TRANSACTION_FINISHED_AT

S = TypeVar("S", bound=StrEnum)


def _finished_before(alias: str, finished_at: Mapping[S, str], cutoff: str) -> str:
    """Each final state with its own time column before the cutoff."""
    return " OR ".join(f"({alias}.state = '{state.value}' AND {alias}.{column} < {cutoff})"
                       for state, column in sorted(finished_at.items()))


def _states(finished_at: Mapping[S, str]) -> str:
    return ", ".join(f"'{state.value}'" for state in sorted(finished_at))


if set(FINISHED_AT) != TERMINAL_STATES:
    raise RuntimeError("every terminal state needs the column recording when it was reached")

# a message retention may remove: final (done or deleted) before the cutoff ``$1``, and not
# dead (a dead message waits for an operator)
FINISHED = f"NOT m.dead AND ({_finished_before('m', FINISHED_AT, '$1')})"

# the guard repeats the selection, so a journal can never delete a message that is not final
DELETE_MESSAGES = f"""
DELETE FROM messages AS m
WHERE m.message_id = ANY($1::text[]) AND NOT m.dead AND m.state IN ({_states(FINISHED_AT)})
RETURNING m.message_id
"""


def delete_late_events(returning: str) -> str:
    """The events of the deleted messages ``$1`` that are not among the archived ids ``$2``
    (written after the batch was read), returning ``returning`` of each."""
    return f"""
DELETE FROM message_events AS e
WHERE e.message_id = ANY($1::text[]) AND NOT (e.id = ANY($2::bigint[]))
RETURNING {returning}
"""


# without an archive: the events of the deleted messages, and journaled orphans; the orphans
# are found once, by id, so the check of their message is an index probe per journaled id
# (never a scan of the messages, whatever the planner guesses of the other branch)
DELETE_EVENTS = """
DELETE FROM message_events AS e
WHERE e.message_id = ANY($1::text[])
   OR e.id = ANY(ARRAY(
        SELECT o.id FROM message_events AS o
        WHERE o.id = ANY($2::bigint[])
          AND NOT EXISTS (SELECT 1 FROM messages AS m WHERE m.message_id = o.message_id)))
"""
# with an archive: only the events archived (journaled or just written as late ones), each of
# a deleted message or an orphan; an event committed after the late ones were read stays
DELETE_ARCHIVED_EVENTS = """
DELETE FROM message_events AS e
WHERE e.id = ANY($2::bigint[])
  AND (e.message_id = ANY($1::text[])
       OR NOT EXISTS (SELECT 1 FROM messages AS m WHERE m.message_id = e.message_id))
"""
# a transaction finished before the cutoff goes once none of its messages is left (its messages
# carry transaction_id and transaction_position into the archive)
DELETE_TRANSACTIONS = f"""
DELETE FROM transactions AS t
WHERE NOT t.dead AND ({_finished_before('t', TRANSACTION_FINISHED_AT, '$1')})
  AND NOT EXISTS (SELECT 1 FROM messages AS m WHERE m.transaction_id = t.transaction_id)
"""
