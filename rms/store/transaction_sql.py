"""The statements that change transactions, as constant SQL text rendered from the
transaction's transition table (:mod:`rms.domain.transaction_transitions`). Each is the only
form of its change: a request that runs alone is a batch of one.

- :func:`create_sql` stores new transactions with their messages and first events.
- :func:`change_sql` confirms or cancels transactions for producers and operators, guarded by
  the state and (when given) the app.
- :func:`answers_sql` records check-back answers (confirm, cancel, retry, flag dead) of any
  claims, guarded by the state and the claim's token, with every answer's ``checked`` events.

A change of a transaction moves its messages in the same statement (so a transaction never
splits) and appends their events; every statement returns one row per message of each
transaction it wrote, in order, beside the transaction's own columns (prefixed ``t_``).
"""

from __future__ import annotations

from collections.abc import Sequence

from rms.domain import phase
from rms.domain import transaction_transitions as ledger
from rms.domain.states import Event
from rms.domain.transaction_transitions import TransactionTransition
from rms.store.batch import unnest_sql
from rms.store.coalesced import INPUT_ARRAYS, INPUT_SQL, first_events_sql, insert_rows_sql
from rms.store.phase import sql_text
from rms.store.schema import transactions
from rms.store.transitions import event_of, set_sql, sql_of

# the prefix of a transaction's columns in a statement's result, beside its message's
ROW = "t_"
_ROW_COLUMNS = ", ".join(f"c.{column.name} AS {ROW}{column.name}" for column in transactions.c)
_SEQ = "confirm_seq"

CREATE_INPUT = (("transaction_id", "text"), ("app", "text"), ("check_url", "text"),
                ("check_after_seconds", "float8"), ("max_checks", "int"))
CHANGE_INPUT = (("transaction_id", "text"), ("app", "text"), ("actor", "text"),
                ("detail", "text"))
ANSWER_INPUT = (("transaction_id", "text"), ("token", "text"), ("action", "text"),
                ("actor", "text"), ("detail", "text"), ("checked", "text"),
                ("delay", "float8"))
# the check-back's answers: the change each applies (a retry moves no message)
ANSWERS: tuple[TransactionTransition, ...] = (
    ledger.CONFIRM, ledger.CANCEL, ledger.RETRY_CHECK, ledger.CHECK_EXHAUSTED)

# the guard of a producer's or operator's change (None: any app's), and of a worker's answer
_BY_APP = "(u.app IS NULL OR t.app = u.app)"
_BY_CLAIM = "t.claim_token = u.token"


def _changed(change: TransactionTransition, guard: str, *, by_action: bool) -> str:
    """The guarded change of the transaction rows of the input (those asking for ``change``,
    when the input names its action), returning each with its item's actor and detail."""
    action = f" AND u.action = '{change.action}'" if by_action else ""
    return f"""changed_{_name(change)} AS (
    UPDATE transactions t SET {set_sql(change, "t.", {"delay": "u.delay"})}
    FROM input u
    WHERE t.transaction_id = u.transaction_id AND t.state = '{change.source.value}'
      AND {guard}{action}
    RETURNING t.*, u.actor AS event_actor, u.detail AS event_detail
)"""


def _moved(change: TransactionTransition) -> str:
    """The change of every message of the changed transactions, by the transition they take
    with it (a confirm claims its messages' first publishes with its own token, and numbers
    its ordered messages in their listed order: the numbers are drawn in a sorted,
    materialized sub-select, as PostgreSQL evaluates a volatile output column after the
    sort)."""
    member, name = change.member, _name(change)
    given = {"token": "'confirm:' || c.transaction_id"}
    moves = {column: effect for column, effect in member.effects.items() if column != _SEQ}
    numbered = sql_of(member.effects[_SEQ], "m.") if _SEQ in member.effects else "NULL"
    moved_seq = f", {_SEQ} = n.seq" if _SEQ in member.effects else ""
    member_set = ", ".join(f"{column} = {sql_of(effect, 'm.', given)}"
                           for column, effect in moves.items())
    return f"""numbered_{name} AS MATERIALIZED (
    SELECT m.message_id, {numbered} AS seq
    FROM messages m JOIN changed_{name} c ON m.transaction_id = c.transaction_id
    WHERE m.state = '{member.source.value}'
    ORDER BY m.transaction_id, m.transaction_position
), moved_{name} AS (
    UPDATE messages m SET {member_set}{moved_seq}
    FROM numbered_{name} n, changed_{name} c
    WHERE m.message_id = n.message_id AND m.transaction_id = c.transaction_id
      AND m.state = '{member.source.value}'
    RETURNING m.*
)"""


def _member_events(change: TransactionTransition) -> str:
    """The event of each moved message, with its item's actor and detail, and when the move
    reserves a delivery, the ``publishing`` event of each member that got one."""
    name = _name(change)
    joined = f"FROM moved_{name} mv JOIN changed_{name} c ON mv.transaction_id = c.transaction_id"
    own = (f"SELECT mv.message_id, 1 AS ord, mv.transaction_id, mv.transaction_position, "
           f"'{event_of(change.member).value}' AS event, c.event_actor AS actor, "
           f"c.event_detail::jsonb AS detail {joined}")
    if change.member is None or not change.member.reserves:
        return own
    return (f"{own} UNION ALL SELECT mv.message_id, 2 AS ord, mv.transaction_id, "
            f"mv.transaction_position, '{Event.PUBLISHING.value}' AS event, c.event_actor AS actor, "
            f"jsonb_build_object('delivery', mv.delivery_count) AS detail {joined} "
            f"WHERE {sql_text(phase.RESERVED, 'mv.')}")


# every answer's ``checked`` event on each message of its transaction (the call was about all
# of them), marked stale when its claim was lost: the call did happen
_CHECKED_EVENTS = (
    f"SELECT m.message_id, 0 AS ord, m.transaction_id, m.transaction_position, "
    f"'{Event.CHECKED.value}' AS event, u.actor, "
    f"u.checked::jsonb || jsonb_build_object('transaction_id', u.transaction_id) || "
    f"CASE WHEN c.transaction_id IS NULL THEN '{{\"stale\": true}}'::jsonb "
    f"ELSE '{{}}'::jsonb END AS detail "
    f"FROM input u JOIN messages m ON m.transaction_id = u.transaction_id "
    f"LEFT JOIN changed c ON c.transaction_id = u.transaction_id")


def _name(change: TransactionTransition) -> str:
    return change.action.replace("-", "_")


def _statement(changes: Sequence[TransactionTransition], guard: str, *, answers: bool) -> str:
    """``changes`` of the input's transactions, in one statement."""
    by_action = len(changes) > 1
    moving = [change for change in changes if change.message is not None]
    events = ([_CHECKED_EVENTS] if answers else []) + [_member_events(c) for c in moving]
    parts = ([_changed(change, guard, by_action=by_action) for change in changes]
             + [_moved(change) for change in moving])
    changed = " UNION ALL ".join(f"SELECT * FROM changed_{_name(c)}" for c in changes)
    moved = " UNION ALL ".join(f"SELECT * FROM moved_{_name(c)}" for c in moving)
    input_columns = ANSWER_INPUT if answers else CHANGE_INPUT
    return f"""
WITH input AS (
    {unnest_sql(input_columns)}
), {", ".join(parts)}, changed AS (
    {changed}
), moved AS (
    {moved}
), history AS (
    INSERT INTO message_events (message_id, event, actor, detail)
    SELECT e.message_id, e.event, e.actor, e.detail FROM (
        {" UNION ALL ".join(events)}
    ) e ORDER BY e.ord, e.transaction_id, e.transaction_position
)
SELECT {_ROW_COLUMNS}, mm.*
FROM changed c LEFT JOIN LATERAL (
    SELECT * FROM moved mv WHERE mv.transaction_id = c.transaction_id
    UNION ALL
    SELECT * FROM messages m WHERE m.transaction_id = c.transaction_id
      AND NOT EXISTS (SELECT 1 FROM moved mv WHERE mv.message_id = m.message_id)
) mm ON true
ORDER BY c.transaction_id, mm.transaction_position
"""


def change_sql(change: TransactionTransition) -> str:
    """``change`` (a confirm or a cancel) of many transactions, each guarded by its source
    state and (when given) its app, with the change of each of its messages and their events
    (each with that item's actor and detail). Binds: the arrays of :data:`CHANGE_INPUT`."""
    return _statement([change], _BY_APP, answers=False)


def answers_sql() -> str:
    """Many check-back answers of any claims: each item's change (:data:`ANSWERS`, by its
    ``action``) only while its claim holds (a late worker matches nothing), every item's
    ``checked`` events first (the item's ``checked`` detail), then its messages' events (its
    ``detail``). Binds: the arrays of :data:`ANSWER_INPUT`."""
    return _statement(ANSWERS, _BY_CLAIM, answers=True)


def create_sql() -> str:
    """Store many new transactions, each with its messages (``pending-send``, the one insert
    of messages) and their first events, in one statement. A transaction whose id is taken, or
    one of whose message ids is, stores nothing and returns nothing; a message id taken by a
    concurrent writer after the statement began fails the statement (it never stores a
    transaction without one of its messages). Binds: the messages' arrays
    (:func:`rms.store.coalesced.insert_arrays`), then those of :data:`CREATE_INPUT`."""
    columns = ", ".join(name for name, _ in CREATE_INPUT)
    prepared = ledger.PREPARE.effects
    given = {"check_after": "f.check_after_seconds"}
    return f"""
WITH input AS (
    {INPUT_SQL}
), asked AS (
    {unnest_sql(CREATE_INPUT, "t", first=INPUT_ARRAYS + 1)}
), fresh AS (
    SELECT a.* FROM asked a
    WHERE NOT EXISTS (SELECT 1 FROM input i JOIN messages m ON m.message_id = i.message_id
                      WHERE i.transaction_id = a.transaction_id)
), created AS (
    INSERT INTO transactions ({columns}, message_ids, {", ".join(prepared)})
    SELECT {", ".join(f"f.{name}" for name, _ in CREATE_INPUT)},
           ARRAY(SELECT i.message_id FROM input i WHERE i.transaction_id = f.transaction_id
                 ORDER BY i.transaction_position),
           {", ".join(sql_of(effect, "f.", given) for effect in prepared.values())}
    FROM fresh f
    ON CONFLICT (transaction_id) DO NOTHING
    RETURNING *
), members AS (
    SELECT i.* FROM input i WHERE i.transaction_id IN (SELECT transaction_id FROM created)
), inserted AS (
    {insert_rows_sql(ledger.PREPARE_MEMBER, "members", skip_taken=False)}
), history AS (
    {first_events_sql(ledger.PREPARE_MEMBER, "inserted")}
)
SELECT {_ROW_COLUMNS}, mm.*
FROM created c LEFT JOIN inserted mm ON mm.transaction_id = c.transaction_id
ORDER BY c.transaction_id, mm.transaction_position
"""


CREATE = create_sql()
CHANGES = {change.action: change_sql(change) for change in (ledger.CONFIRM, ledger.CANCEL)}
ANSWER = answers_sql()
