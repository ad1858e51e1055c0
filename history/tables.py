"""The history's columns, shared by the export (pyarrow) and the report (Spark), so a Parquet
export and a JDBC read give the report the same schema.

The report reads only ``REPORT_MESSAGE_COLUMNS`` and ``REPORT_EVENT_COLUMNS``; the export keeps
every message column but the transient ``claim_token`` (payload and headers as JSON text), so
it also serves as the retention archive (``history.archive``, ``rms retention run``).
"""

from __future__ import annotations

from typing import Any

# (name, pyarrow type name, Spark SQL type)
_TYPES = {
    "text": ("string", "STRING"),
    "bool": ("bool_", "BOOLEAN"),
    "int": ("int32", "INT"),
    "bigint": ("int64", "BIGINT"),
    "float": ("float64", "DOUBLE"),
    "ts": ("timestamp", "TIMESTAMP"),
}

MESSAGE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("message_id", "text"),
    ("app", "text"),
    ("topic", "text"),
    ("key", "text"),
    ("payload", "text"),
    ("headers", "text"),
    ("check_url", "text"),
    ("state", "text"),
    ("dead", "bool"),
    ("dead_reason", "text"),
    ("check_count", "int"),
    ("delivery_count", "int"),
    ("delivery_base", "int"),
    ("check_after_seconds", "float"),
    ("max_checks", "int"),
    ("ack_timeout_seconds", "float"),
    ("max_deliveries", "int"),
    ("created_at", "ts"),
    ("confirmed_at", "ts"),
    ("done_at", "ts"),
    ("deleted_at", "ts"),
    ("next_check_at", "ts"),
    ("next_delivery_at", "ts"),
    ("deliver_after", "ts"),
    ("traceparent", "text"),
    ("tracestate", "text"),
    ("ordered", "bool"),
    ("confirm_seq", "bigint"),
    ("transaction_id", "text"),
    ("transaction_position", "int"),
    # several consumers per message: the subscribers (a JSON array of app names, null under the
    # single-ack rule) and the acks by consumer (JSON), as the message object shows them
    ("subscribers", "text"),
    ("acks", "text"),
)

EVENT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "bigint"),
    ("message_id", "text"),
    ("at", "ts"),
    ("event", "text"),
    ("actor", "text"),
    ("detail", "text"),
)

REPORT_MESSAGE_COLUMNS = (
    "message_id", "app", "topic", "state", "dead", "dead_reason", "check_count",
    "delivery_count", "created_at", "confirmed_at", "done_at", "deleted_at", "next_check_at",
    "next_delivery_at", "deliver_after", "subscribers", "acks",
)
REPORT_EVENT_COLUMNS = ("message_id", "at", "event", "actor", "detail")

# jsonb columns are exported as their JSON text, and array columns as JSON arrays
JSON_COLUMNS = frozenset({"payload", "headers", "detail", "acks"})
JSON_ARRAY_COLUMNS = frozenset({"subscribers"})


def select_list(columns: tuple[tuple[str, str], ...], alias: str) -> str:
    """The SQL select list of ``columns`` of the table aliased ``alias``, as exported."""
    return ", ".join(_selected(name, alias) for name, _ in columns)


def _selected(name: str, alias: str) -> str:
    if name in JSON_ARRAY_COLUMNS:
        return f"to_jsonb({alias}.{name})::text AS {name}"
    if name in JSON_COLUMNS:
        return f"{alias}.{name}::text AS {name}"
    return f"{alias}.{name}"


def arrow_schema(columns: tuple[tuple[str, str], ...]) -> Any:
    import pyarrow as pa

    def arrow_type(kind: str) -> Any:
        if kind == "ts":
            return pa.timestamp("us", tz="UTC")
        return getattr(pa, _TYPES[kind][0])()

    return pa.schema([pa.field(name, arrow_type(kind)) for name, kind in columns])


def spark_ddl(columns: tuple[tuple[str, str], ...], names: tuple[str, ...]) -> str:
    """A Spark DDL schema string (``"message_id STRING, ..."``) of the chosen columns."""
    kinds = dict(columns)
    return ", ".join(f"`{name}` {_TYPES[kinds[name]][1]}" for name in names)
