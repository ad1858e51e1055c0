"""The store's hot statements as asyncpg runs them, each with the arguments of one plausible
call, for ``EXPLAIN`` (``bench.plans``): the prepare insert, the confirm and the ack of one new
message (run in that order they take it through its life), the check-back and redelivery
claims of a worker's batch, and retention's deletes of a batch (given its message ids).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect

from rms.store import checkback, redelivery
from rms.store.golden import STATEMENTS
from rms.store.raw import RawStatement

Call = tuple[str, str, list[Any]]  # name, SQL, positional arguments
ACTOR = "plans"


def message_calls(message_id: str, app: str) -> list[Call]:
    """Prepare, confirm and ack of ``message_id`` for ``app`` (an existing app)."""
    transition = [[message_id], [None], [ACTOR], ["{}"]]
    prepare = [[message_id], [app], ["plans.orders"], [None], ['{"order_id": 1}'], ["{}"],
               ["https://orders.internal/rms/check"], [10.0], [15], [60.0], [6], [None],
               [None], [False], [None], [None], [None], [0.0]]
    return [("prepare", STATEMENTS["message-prepare"](), prepare),
            ("confirm", STATEMENTS["message-confirm"](), transition),
            ("ack", STATEMENTS["message-ack"](), [[message_id], [app], ["http"], [None]])]


def claim_calls(limit: int, lease_seconds: float) -> list[Call]:
    """One check-back claim and one redelivery claim of up to ``limit`` messages."""
    token = f"{ACTOR}:{uuid.uuid4().hex}"
    checks = RawStatement(checkback.CLAIM, asyncpg_dialect())  # type: ignore[no-untyped-call]
    deliveries = RawStatement(redelivery.round_statement(limit, token, lease_seconds, ACTOR),
                              asyncpg_dialect())  # type: ignore[no-untyped-call]
    return [("checkback-claim", checks.sql, checks.args(limit=limit, lease=lease_seconds,
                                                        token=token, actor=ACTOR)),
            ("redelivery-claim", deliveries.sql, deliveries.args())]


def retention_calls(message_ids: Sequence[str]) -> list[Call]:
    """Retention's deletes of one batch (without an archive)."""
    ids = list(message_ids)
    return [("retention-delete-messages", STATEMENTS["retention-delete-messages"](), [ids]),
            ("retention-delete-events", STATEMENTS["retention-delete-events"](), [ids, []])]
