"""Loading the history a report covers into three DataFrames with one schema whatever the
source: ``messages`` and ``events`` (the report window) and ``open`` (for the stuck list).

Window: a report covers the messages *created* in ``[since, until)`` (a missing bound is open)
and every event of those messages, whenever it happened: a message created at 10:59 and
acknowledged at 11:01 counts in the 10:00 hour, ack included. Re-running a window later
updates the outcomes of the messages that were still in flight. ``open`` holds the messages
created before ``until`` (whatever ``since``) that are pending-send, sent or dead, so an hourly
report still lists a message that got stuck yesterday.

JDBC: the window's creation-time range (read first, with the database clock) is cut into
``partitions`` equal slices and each slice is one query on its own connection, for messages
and for events alike (events are joined to their message, so every slice uses the
``messages_created`` index). Events come with their JSON detail only where the report reads it
(``spark.facts.DETAIL_EVENTS``). The slices are separate transactions, not one snapshot: a
message that changes during the read may show an event without the matching state change,
which the metrics tolerate (see ``spark.facts``).

Parquet: the ``rms export`` layout (``messages/``, ``events/``, ``open/``, ``_export.json``);
the window filters it again, so one large export serves many report windows. Without
``open/`` (a foreign export) the stuck list comes from the window's messages. The source's
clock ("now" for what is stuck) is the manifest's ``exported_at``.

Archive: the retention archive (``history.archive``: one ``rms export`` directory per creation
day) read next to a live source, so a report reaches back past the retention age. Only the
days the window touches are read. A message present in both (a retention run that died
between its archive and its delete, before the next run finished it) counts once, from the
live source, with the live source's events; the stuck list and the clock are the live
source's (the archive holds finished messages only).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from history.archive import archived_days, day_dir
from history.dburl import jdbc_target
from history.options import ReportError, Window
from history.states import open_states_sql
from history.tables import (
    EVENT_COLUMNS,
    MESSAGE_COLUMNS,
    REPORT_EVENT_COLUMNS,
    REPORT_MESSAGE_COLUMNS,
    select_list,
    spark_ddl,
)
from spark.facts import DETAIL_EVENTS

MESSAGES_DDL = spark_ddl(MESSAGE_COLUMNS, REPORT_MESSAGE_COLUMNS)
EVENTS_DDL = spark_ddl(EVENT_COLUMNS, REPORT_EVENT_COLUMNS)
JDBC_FETCH_SIZE = "10000"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class JdbcSource:
    database_url: str
    partitions: int = 8
    name: str = "jdbc"


@dataclass(frozen=True)
class ParquetSource:
    path: Path
    name: str = "parquet"


@dataclass(frozen=True)
class ArchiveSource:
    """A retention archive (``rms retention run --archive``) together with the live source."""

    path: Path
    live: JdbcSource | ParquetSource

    @property
    def name(self) -> str:
        return f"{self.live.name}+archive"


@dataclass(frozen=True)
class History:
    messages: Any  # DataFrame
    events: Any
    open: Any
    clock: datetime | None  # the source's "now": database clock or export snapshot


def load_history(spark: Any, source: JdbcSource | ParquetSource | ArchiveSource,
                 window: Window) -> History:
    if isinstance(source, ArchiveSource):
        return _with_archive(spark, source, window)
    if isinstance(source, JdbcSource):
        return _load_jdbc(spark, source, window)
    return _load_parquet(spark, source.path, window)


def _normalise(frame: Any, ddl: str) -> Any:
    """The report's column order and types, whatever the source produced."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    schema = StructType.fromDDL(ddl)
    assert isinstance(schema, StructType)
    return frame.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])


# --- Parquet ------------------------------------------------------------------------------


def export_clock(path: Path) -> datetime | None:
    manifest = path / "_export.json"
    if not manifest.is_file():
        return None
    try:
        stamp = json.loads(manifest.read_text(encoding="utf-8")).get("exported_at")
        return datetime.fromisoformat(stamp) if isinstance(stamp, str) else None
    except ValueError as exc:
        raise ReportError(f"{manifest}: unreadable manifest ({exc})") from None


def _window_filter(frame: Any, window: Window) -> Any:
    from pyspark.sql import functions as F

    if window.since:
        frame = frame.where(F.col("created_at") >= F.lit(window.since))
    if window.until:
        frame = frame.where(F.col("created_at") < F.lit(window.until))
    return frame


def _load_parquet(spark: Any, path: Path, window: Window) -> History:
    def table(name: str, ddl: str) -> Any:
        return _normalise(spark.read.schema(ddl).parquet(str(path / name)), ddl)

    messages = _window_filter(table("messages", MESSAGES_DDL), window)
    events = table("events", EVENTS_DDL)
    if window.since or window.until:  # skip the events of other windows early
        events = events.join(messages.select("message_id"), "message_id", "left_semi")
    if (path / "open").is_dir():
        opened = _window_filter(table("open", MESSAGES_DDL), Window(until=window.until))
    else:
        opened = messages
    return History(messages, events, opened, export_clock(path))


# --- archive ------------------------------------------------------------------------------


def archive_days(path: Path, window: Window) -> list[Path]:
    """The archive's day directories whose creation day the window touches."""
    first = window.since.astimezone(UTC).date() if window.since else None
    last = window.until.astimezone(UTC).date() if window.until else None
    return [day_dir(path, day) for day in archived_days(path)
            if (first is None or day >= first) and (last is None or day <= last)]


def _archive_table(spark: Any, days: list[Path], table: str, ddl: str) -> Any:
    paths = [str(day / table) for day in days if any((day / table).glob("part-*.parquet"))]
    if not paths:
        return spark.createDataFrame([], ddl)
    return _normalise(spark.read.schema(ddl).parquet(*paths), ddl)


def _with_archive(spark: Any, source: ArchiveSource, window: Window) -> History:
    live = load_history(spark, source.live, window)
    days = archive_days(source.path, window)
    archived = _window_filter(_archive_table(spark, days, "messages", MESSAGES_DDL), window)
    only_archived = archived.join(live.messages.select("message_id"), "message_id", "left_anti")
    events = _archive_table(spark, days, "events", EVENTS_DDL).join(
        only_archived.select("message_id"), "message_id", "left_semi")
    return History(live.messages.unionByName(only_archived), live.events.unionByName(events),
                   live.open, live.clock)


# --- JDBC ---------------------------------------------------------------------------------


def _literal(value: datetime) -> str:
    return f"TIMESTAMPTZ '{value.isoformat()}'"


def window_sql(window: Window, column: str) -> str:
    clauses = ["TRUE"]
    if window.since:
        clauses.append(f"{column} >= {_literal(window.since)}")
    if window.until:
        clauses.append(f"{column} < {_literal(window.until)}")
    return " AND ".join(clauses)


def slice_predicates(window: Window, column: str, low: datetime | None,
                     high: datetime | None, partitions: int) -> list[str]:
    """One WHERE clause per partition; together they cover the window exactly once."""
    base = window_sql(window, column)
    if low is None or high is None or high <= low or partitions == 1:
        return [base]
    cuts = sorted({low + (high - low) * i / partitions for i in range(1, partitions)})
    bounds: list[tuple[datetime | None, datetime | None]] = list(
        zip([None, *cuts], [*cuts, None], strict=True)
    )
    return [base + " AND " + window_sql(Window(since, until), column) for since, until in bounds]


def _message_select(table: str = "messages") -> str:
    """The report's message columns, the subscribers and acks as JSON text (as exported)."""
    kinds = dict(MESSAGE_COLUMNS)
    columns = tuple((name, kinds[name]) for name in REPORT_MESSAGE_COLUMNS)
    return f"SELECT {select_list(columns, 'm')} FROM {table} AS m"


_EVENTS_SQL = (  # the detail only of the events whose detail the report reads, the actor of acks
    "SELECT e.message_id, e.at, e.event, "
    "CASE WHEN e.event = 'acked' THEN e.actor END AS actor, CASE WHEN e.event IN ("
    + ", ".join(f"'{name}'" for name in DETAIL_EVENTS)
    + ") THEN e.detail::text END AS detail, m.created_at AS message_created_at "
    "FROM message_events AS e JOIN messages AS m ON m.message_id = e.message_id"
)


def _load_jdbc(spark: Any, source: JdbcSource, window: Window) -> History:
    target = jdbc_target(source.database_url)
    properties = {**target.properties, "fetchsize": JDBC_FETCH_SIZE}

    def read(sql: str, predicates: list[str] | None = None) -> Any:
        return spark.read.jdbc(target.url, f"({sql}) AS q", predicates=predicates,
                               properties=properties)

    clock, low, high = _bounds(read(
        f"SELECT {_micros('now()')} AS clock, {_micros('min(created_at)')} AS low, "
        f"{_micros('max(created_at)')} AS high "
        f"FROM messages WHERE {window_sql(window, 'created_at')}"
    ).collect()[0])
    messages = read(_message_select(), slice_predicates(
        window, "created_at", low, high, source.partitions))
    events = read(_EVENTS_SQL, slice_predicates(
        window, "message_created_at", low, high, source.partitions))
    opened = read(
        f"{_message_select()} WHERE (dead OR state IN ({open_states_sql()})) AND "
        f"{window_sql(Window(until=window.until), 'created_at')}"
    )
    return History(_normalise(messages, MESSAGES_DDL), _normalise(events, EVENTS_DDL),
                   _normalise(opened, MESSAGES_DDL), clock)


def _micros(expression: str) -> str:
    """Timestamps cross as epoch microseconds: collect() would turn them into naive local
    times of the Python process."""
    return f"(extract(epoch FROM {expression}) * 1000000)::bigint"


def _bounds(row: Any) -> tuple[datetime, datetime | None, datetime | None]:
    def instant(micros: int | None) -> datetime | None:
        return None if micros is None else EPOCH + timedelta(microseconds=micros)

    clock = instant(row["clock"])
    assert clock is not None
    return clock, instant(row["low"]), instant(row["high"])
