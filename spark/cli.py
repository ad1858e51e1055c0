"""``rms report``: the SLA report (see ``spark/README.md``). Arguments are checked before Spark
is imported, so a mistake answers at once with exit code 2 and no traceback."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from history.dburl import check_connection, jdbc_target
from history.options import (
    ReportError,
    UsageError,
    database_url,
    non_negative_float,
    parse_instant,
    parse_window,
    positive_int,
)
from rms.domain.counts import counted
from spark.session import jdbc_jar, spark_conf
from spark.targets import load_targets

PROG = "rms report"


def configure(parser: argparse.ArgumentParser) -> None:
    source = parser.add_argument_group("input")
    source.add_argument("--source", choices=("jdbc", "parquet"),
                        help="jdbc (default) or parquet (default when --input is given)")
    source.add_argument("--input", type=Path, help="an `rms export` directory (parquet)")
    source.add_argument("--archive", type=Path,
                        help="also read this retention archive (`rms retention run --archive`)"
                        " for the messages gone from the live source")
    source.add_argument("--database-url", help="overrides RMS_DATABASE_URL (jdbc)")
    source.add_argument("--jdbc-jar", help="PostgreSQL JDBC driver jar; default RMS_JDBC_JAR, "
                        "else /usr/share/java/postgresql.jar")
    source.add_argument("--jdbc-partitions", type=positive_int, default=8,
                        help="parallel JDBC reads, each a slice of the window (default 8)")
    report = parser.add_argument_group("report")
    report.add_argument("--out", type=Path, required=True, help="output directory")
    report.add_argument("--since", help="first creation time included (ISO 8601, UTC)")
    report.add_argument("--until", help="creation time excluded from here on (ISO 8601)")
    report.add_argument("--as-of", help="'now' for stuck and SLA-pending (default: the "
                        "database clock, or the export's snapshot time)")
    report.add_argument("--grace", type=non_negative_float, default=60.0,
                        help="seconds past a deadline before a message counts as stuck")
    report.add_argument("--targets", type=Path, help="SLA targets file (TOML or JSON)")
    report.add_argument("--list-limit", type=positive_int, default=100,
                        help="stuck and dead messages listed in summary.json (default 100)")
    spark = parser.add_argument_group("spark")
    spark.add_argument("--master", help="Spark master (default local[*])")
    spark.add_argument("--driver-memory", help="e.g. 4g (ignored under spark-submit)")
    spark.add_argument("--conf", action="append", metavar="KEY=VALUE",
                       help="any Spark setting; repeatable")
    spark.add_argument("--log-level", default="WARN", help="Spark log level (default WARN)")


def _under_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _source(args: argparse.Namespace) -> Any:
    from spark.inputs import ArchiveSource

    live = _live_source(args)
    if args.archive is None:
        return live
    if not args.archive.is_dir():
        raise UsageError(f"--archive {args.archive} is not a directory")
    return ArchiveSource(args.archive, live)


def _live_source(args: argparse.Namespace) -> Any:
    from spark.inputs import JdbcSource, ParquetSource

    kind = args.source or ("parquet" if args.input else "jdbc")
    if kind == "parquet":
        if args.input is None:
            raise UsageError("--source parquet needs --input DIR")
        missing = [n for n in ("messages", "events") if not (args.input / n).is_dir()]
        if missing:
            raise UsageError(f"--input {args.input} is not an `rms export` directory "
                             f"(no {', '.join(missing)}/)")
        return ParquetSource(args.input)
    if args.input is not None:
        raise UsageError("--input is only for --source parquet")
    url = database_url(args.database_url)
    jdbc_target(url)  # a form the JDBC read cannot use fails here, before Spark starts
    return JdbcSource(url, partitions=args.jdbc_partitions)


def _jar(args: argparse.Namespace, source: Any) -> Path | None:
    jar = jdbc_jar(args.jdbc_jar)
    if source.name.startswith("jdbc") and jar is None and not _under_spark_submit():
        raise UsageError(
            "no PostgreSQL JDBC driver: pass --jdbc-jar or set RMS_JDBC_JAR (Debian: apt-get "
            "install libpostgresql-jdbc-java), or read an `rms export` with --input DIR")
    return jar


def build(args: argparse.Namespace) -> tuple[Any, Any]:
    """The report configuration and Spark settings; ``UsageError`` for a bad argument."""
    from spark.report import ReportConfig
    from spark.session import SessionSettings

    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} exists and is not a directory")
    window = parse_window(args.since, args.until)
    as_of = parse_instant(args.as_of, "--as-of") if args.as_of else None
    conf = spark_conf(args.conf)
    targets = load_targets(args.targets)
    source = _source(args)
    config = ReportConfig(
        out=args.out, source=source, window=window, as_of=as_of, grace_seconds=args.grace,
        targets=targets, list_limit=args.list_limit,
    )
    settings = SessionSettings(master=args.master, driver_memory=args.driver_memory,
                               jdbc_jar=_jar(args, source), conf=conf, log_level=args.log_level,
                               launched_here=not _under_spark_submit())
    return config, settings


def _check_database(args: argparse.Namespace, config: Any) -> None:
    """Before Spark starts, one connection with the JDBC read's URL and TLS settings: Spark
    would say only that the connection failed, this names why (an untrusted certificate, a
    wrong password, an unreachable host)."""
    if not config.source.name.startswith("jdbc"):
        return
    try:
        check_connection(database_url(args.database_url))
    except ReportError as exc:
        raise ReportError(f"the report failed: {exc}") from None


def _describe(error: BaseException) -> str:
    """The first line of the Java exception when there is one (py4j's own message only says
    which call failed), with a hint when the heap ran out."""
    java = getattr(error, "java_exception", None)
    text = str(java.toString() if java is not None else error).strip()
    first = text.splitlines()[0] if text else type(error).__name__
    died = java is None and "An error occurred while calling" in first
    if died:
        first = "the Spark JVM stopped answering, most likely out of memory"
    if died or "OutOfMemoryError" in text:
        first += " (raise --driver-memory, or the executor memory on a cluster)"
    return first


def _report(config: Any, settings: Any) -> dict[str, Any]:
    from py4j.protocol import Py4JError  # type: ignore[import-untyped]
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    from spark.report import run_report
    from spark.session import build_session

    borrowed = SparkSession.getActiveSession() is not None  # a caller's session: keep it
    spark = build_session(settings)
    try:
        summary: dict[str, Any] = run_report(spark, config)
        return summary
    except (Py4JError, PySparkException) as exc:
        raise ReportError(f"the report failed: {_describe(exc)}") from exc
    finally:
        if not borrowed:
            spark.stop()


def run(args: argparse.Namespace) -> int:
    try:
        config, settings = build(args)
        _check_database(args, config)
        summary = _report(config, settings)
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except ReportError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    print(summary_line(summary, config.out))
    return 0


def summary_line(summary: dict[str, Any], out: Path) -> str:
    """The one line ``rms report`` prints: what the report counted and where it is."""
    return (f"{PROG}: {counted(summary['totals']['messages'], 'message')}, "
            f"{summary['stuck']['total']} stuck, {summary['dead']['total']} dead; "
            f"written to {out}")
