"""What is stuck at the report's "now" (``--as-of``, else the source's clock: the database
clock for JDBC, the export snapshot for Parquet).

Among the messages created before ``--until`` (whatever ``--since``, see ``spark.inputs``):

- ``pending-send``: state pending-send, not dead, and its next check-back was due more than
  ``grace`` seconds ago (``next_check_at < now - grace``): the confirm service is behind or
  down;
- ``unacked``: state sent, not dead, and its ack deadline passed more than ``grace`` seconds
  ago (``next_delivery_at < now - grace``): the recovery service has not redelivered it;
- ``dead``: every message flagged dead (check-exhausted or delivery-exhausted), listed apart:
  they wait for an operator, not for a worker.

A pending-send or sent message without a deadline is stuck too (no worker will ever pick it
up); its ``overdue_seconds`` is null. Rows come sorted: stuck ones most overdue first (no
deadline first of all), then dead ones oldest first.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from rms.domain.states import State
from spark.facts import seconds_between

_PENDING = State.PENDING_SEND.value
DEAD, UNACKED = "dead", "unacked"

DEFAULT_GRACE_SECONDS = 60.0


def stuck_messages(opened: Any, now: datetime, grace_seconds: float) -> Any:
    """The stuck and dead messages as an Arrow table, in the order above (sorted by the
    driver, which holds the list anyway)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = _stuck(opened, now, grace_seconds).toArrow()
    overdue = table["overdue_seconds"]
    order = pc.sort_indices(pa.table({
        "dead": pc.equal(table["kind"], "dead"), "deadline": pc.is_valid(overdue),
        "overdue": pc.fill_null(overdue, 0.0), "created_at": table["created_at"],
        "message_id": table["message_id"]}), sort_keys=[
        ("dead", "ascending"), ("deadline", "ascending"), ("overdue", "descending"),
        ("created_at", "ascending"), ("message_id", "ascending")])
    return table.take(order)


def stuck_kind(now: datetime, grace_seconds: float) -> Any:
    """A message's kind in the stuck list (``dead``, ``pending-send``, ``unacked``), null
    when it is not stuck: the column every use of the list's definition reads."""
    from pyspark.sql import functions as F

    col = F.col
    cutoff = F.lit(now - timedelta(seconds=grace_seconds))

    def overdue(deadline: str) -> Any:
        return col(deadline).isNull() | (col(deadline) < cutoff)

    return (
        F.when(col("dead"), F.lit(DEAD))
        .when((col("state") == _PENDING) & overdue("next_check_at"), F.lit(_PENDING))
        .when((col("state") == State.SENT.value) & overdue("next_delivery_at"), F.lit(UNACKED))
    )


def _stuck(opened: Any, now: datetime, grace_seconds: float) -> Any:
    from pyspark.sql import functions as F

    col = F.col
    kind = stuck_kind(now, grace_seconds)
    deadline = (F.when(col("dead"), F.lit(None))
                .when(col("state") == _PENDING, col("next_check_at"))
                .otherwise(col("next_delivery_at")))
    rows = opened.select(
        "message_id", "app", "topic", kind.alias("kind"), "state",
        F.when(col("dead"), col("dead_reason")).alias("dead_reason"),
        "created_at", deadline.alias("deadline"),
        seconds_between(deadline, F.lit(now)).alias("overdue_seconds"),
        seconds_between(col("created_at"), F.lit(now)).alias("age_seconds"),
        "check_count", "delivery_count",
    )
    return rows.where(col("kind").isNotNull())
