"""Fixtures of the Spark report tests: one local SparkSession and one embedded PostgreSQL for
the whole session (prefixed ``spark_`` so they never clash with the suite's own fixtures). A
plugin of the whole suite (``tests/conftest.py``), so that the integration tier's report tests
and the system tier's standalone-cluster test share one session per pytest worker."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from history.export import ExportRequest, export
from history.options import parse_instant, parse_window
from rms.devstack.embedded import EmbeddedPostgres
from rms.store.migrate import upgrade
from spark.inputs import JdbcSource, ParquetSource
from spark.report import ReportConfig, run_report
from spark.session import DEFAULT_JDBC_JAR
from spark.targets import load_targets
from tests.integration.spark.history import (
    AS_OF,
    SINCE,
    TARGETS_TOML,
    UNTIL,
    Report,
    hand_history,
    store,
)

JDBC_JAR = Path(os.environ.get("RMS_JDBC_JAR") or DEFAULT_JDBC_JAR)


@pytest.fixture(scope="session")
def spark_jdbc_jar() -> Path:
    if not JDBC_JAR.is_file():
        pytest.fail(f"no PostgreSQL JDBC driver at {JDBC_JAR}: "
                    "apt-get install libpostgresql-jdbc-java (or set RMS_JDBC_JAR)")
    return JDBC_JAR


@pytest.fixture(scope="session")
def spark_session(spark_jdbc_jar: Path) -> Iterator[Any]:
    """local[2], two shuffle partitions, no UI: small and quick."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from spark.session import SessionSettings, build_session

    session = build_session(SessionSettings(
        master="local[2]",
        driver_memory="2g",
        jdbc_jar=spark_jdbc_jar,
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            # the C1 compiler alone: the suite's small reports are done before the second
            # compiler would pay for itself (its whole Spark tier in two thirds of the time)
            "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
        },
    ))
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_postgres() -> Iterator[EmbeddedPostgres]:
    """Its data directory lives outside pytest's base temp directory on purpose: every pytest
    session that starts (say, a colleague's run) resets /tmp/pytest-of-<user> to mode 0700,
    which locks out the unprivileged user the server runs as when tests run as root."""
    base = Path(tempfile.mkdtemp(prefix="rms-spark-pg-"))
    server = EmbeddedPostgres(base / "data", fsync=False)
    try:
        server.start()
        yield server
    finally:
        server.stop("immediate")
        shutil.rmtree(base, ignore_errors=True)


def new_database(server: EmbeddedPostgres, name: str) -> str:
    """A migrated, empty database; returns its ``postgresql+asyncpg://`` URL."""
    server.create_database(name)
    upgrade(server.url(name))
    return server.url(name)


@pytest.fixture(scope="session")
def spark_hand_db(spark_postgres: EmbeddedPostgres) -> str:
    """The hand-written history (``tests/integration/spark/history.py``) in its own database."""
    url = new_database(spark_postgres, "spark_hand")
    store(spark_postgres.dsn("spark_hand"), hand_history())
    return url


@pytest.fixture(scope="session")
def spark_hand_export(spark_hand_db: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The hand-written history's ``rms export`` (small row groups: several per file)."""
    out = tmp_path_factory.mktemp("hand") / "export"
    export(ExportRequest(spark_hand_db, out, parse_window(SINCE, UNTIL), batch_size=7))
    return out


@pytest.fixture(scope="session")
def spark_hand_targets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    targets = tmp_path_factory.mktemp("hand-targets") / "targets.toml"
    targets.write_text(TARGETS_TOML, encoding="utf-8")
    return targets


@pytest.fixture(scope="session")
def spark_hand_reports(spark_session: Any, spark_hand_db: str, spark_hand_export: Path,
                       spark_hand_targets: Path,
                       tmp_path_factory: pytest.TempPathFactory) -> dict[str, Report]:
    """The report of the hand-written history on the suite's ``local[2]`` session, from
    PostgreSQL (three JDBC slices) and from its export."""
    base = tmp_path_factory.mktemp("hand-reports")
    sources: dict[str, JdbcSource | ParquetSource] = {
        "jdbc": JdbcSource(spark_hand_db, partitions=3),
        "parquet": ParquetSource(spark_hand_export),
    }
    return {
        name: Report(run_report(spark_session, ReportConfig(
            out=base / name, source=source, window=parse_window(SINCE, UNTIL),
            as_of=parse_instant(AS_OF, "as of"), targets=load_targets(spark_hand_targets))),
            base / name)
        for name, source in sources.items()
    }
