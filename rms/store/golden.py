"""The rendered text of every fixed statement of the store, checked in as
``rms/store/sql/<name>.sql`` so that a change to a statement shows in review as a change of
SQL. A test compares the files with what the store renders; after changing a statement (or a
transition it is rendered from), write them again with::

    python -m rms.store.golden

Constant text statements are written as they run; Core statements as compiled for asyncpg.
Statements whose limits, leases or actors are baked in per worker (the redelivery round and
the ordering run claims) are rendered per worker and are not among them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect
from sqlalchemy.sql import ClauseElement

from rms.domain import transitions as table
from rms.store import (
    admin,
    apps,
    checkback,
    coalesced,
    dispatch,
    ordering,
    retention_sql,
    transaction_sql,
    transactions,
)
from rms.store.sql_layout import layout
from rms.store.subscriptions import acks, release, views
from rms.store.subscriptions import store as subscriptions

SQL_DIR = Path(__file__).resolve().parent / "sql"


def _compiled(statement: ClauseElement) -> str:
    return str(statement.compile(dialect=asyncpg_dialect()))  # type: ignore[no-untyped-call]


def _text(sql: str) -> Callable[[], str]:
    return lambda: sql


def _core(statement: ClauseElement) -> Callable[[], str]:
    return lambda: _compiled(statement)


STATEMENTS: Mapping[str, Callable[[], str]] = {
    "message-prepare": _text(coalesced.insert_statement(one_shot=False)),
    "message-send": _text(coalesced.insert_statement(one_shot=True)),
    "message-confirm": _text(coalesced.transition_sql(table.CONFIRM)),
    "message-cancel": _text(coalesced.transition_sql(table.CANCEL)),
    "message-ack": _text(acks.ACK_SQL),
    "message-ack-ids": _text(acks.ACK_MANY_SQL),
    "messages-by-id": _text(coalesced.SELECT_MESSAGES.sql),
    "ack-targets": _core(subscriptions.ACK_TARGETS),
    "transaction-create": _text(transaction_sql.CREATE),
    "transaction-confirm": _text(transaction_sql.CHANGES["confirm"]),
    "transaction-cancel": _text(transaction_sql.CHANGES["cancel"]),
    "transaction-answers": _text(transaction_sql.ANSWER),
    "transaction-claim": _core(transactions.CLAIM),
    "checkback-claim": _core(checkback.CLAIM),
    "checkback-answers": _core(checkback.RECORD_ANSWERS),
    "checkback-oldest-due-lag": _core(checkback.OLDEST_DUE_LAG),
    "publish-outcomes": _core(dispatch.RECORD),
    "ordering-add-keys": _core(ordering._ADD_KEYS),
    "ordering-lease-keys": _core(ordering._LEASE_KEYS),
    "ordering-queues": _core(ordering._QUEUES),
    "ordering-hold": _core(ordering._HOLD),
    "ordering-release-keys": _core(ordering._RELEASE),
    "admin-blocked-keys": _core(admin._BLOCKED_KEYS),
    "apps-named": _text(apps._APPS_NAMED.sql),
    "apps-set-consume-topics": _text(release.SET_CONSUME_TOPICS),
    "apps-delete": _text(release.DELETE_APP),
    "admin-consumer-backlogs": _core(views.CONSUMER_BACKLOGS),
    "retention-finished": _text(retention_sql.FINISHED),
    "retention-delete-messages": _text(retention_sql.DELETE_MESSAGES),
    "retention-delete-events": _text(retention_sql.DELETE_EVENTS),
    "retention-delete-archived-events": _text(retention_sql.DELETE_ARCHIVED_EVENTS),
    "retention-delete-transactions": _text(retention_sql.DELETE_TRANSACTIONS),
}


def rendered() -> dict[str, str]:
    """Every golden file's name and text (one statement laid out for a reader,
    :mod:`rms.store.sql_layout`)."""
    return {f"{name}.sql": layout(STATEMENTS[name]()) for name in STATEMENTS}


def write(directory: Path = SQL_DIR) -> list[str]:
    """Write every golden file (and remove the ones of statements no longer listed);
    returns the names written."""
    directory.mkdir(exist_ok=True)
    files = rendered()
    for stale in directory.glob("*.sql"):
        if stale.name not in files:
            stale.unlink()
    for name, sql in files.items():
        (directory / name).write_text(sql, encoding="utf-8")
    return sorted(files)


def main() -> int:
    names = write()
    print(f"wrote {len(names)} statements to {SQL_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
