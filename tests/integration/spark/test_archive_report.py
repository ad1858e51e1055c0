"""The report over the retention archive and the live tables together equals the report over
the whole live history before retention removed part of it; a message present in both counts
once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from history.options import parse_instant, parse_window
from history.pacing import Pace
from history.retention import RetentionRequest, run_retention
from rms.cli import main
from rms.devstack.embedded import EmbeddedPostgres
from spark.inputs import ArchiveSource, JdbcSource, archive_days
from spark.report import ReportConfig, run_report
from spark.targets import load_targets
from tests.integration.spark.fixtures import new_database
from tests.integration.spark.history import AS_OF, SINCE, UNTIL, hand_history, store

pytestmark = pytest.mark.spark

CUTOFF = "2026-03-02T20:00:00Z"  # part of the window's finished messages go, part stay


def _report(spark: Any, source: Any, out: Path, targets: Path) -> dict[str, Any]:
    summary: dict[str, Any] = run_report(spark, ReportConfig(
        out=out, source=source, window=parse_window(SINCE, UNTIL),
        as_of=parse_instant(AS_OF, "as of"), targets=load_targets(targets)))
    return summary


def _comparable(summary: dict[str, Any], out: Path) -> dict[str, Any]:
    tables = {name: pq.read_table(out / f"{name}.parquet").to_pylist()
              for name in ("hourly", "daily", "topics", "stuck", "consumers")}
    return {**{k: v for k, v in summary.items() if k not in {"generated_at", "source"}},
            "tables": tables}


def _database(server: EmbeddedPostgres, name: str) -> str:
    url = new_database(server, name)
    store(server.dsn(name), hand_history())
    return url


@pytest.fixture(scope="module")
def spark_full_report(spark_session: Any, spark_postgres: EmbeddedPostgres,
                      spark_hand_targets: Path, tmp_path_factory: pytest.TempPathFactory
                      ) -> dict[str, Any]:
    url = _database(spark_postgres, "archive_full")
    out = tmp_path_factory.mktemp("full") / "report"
    return _comparable(_report(spark_session, JdbcSource(url, partitions=3), out,
                               spark_hand_targets), out)


def test_archive_plus_live_equals_the_full_history(
        spark_session: Any, spark_postgres: EmbeddedPostgres, spark_hand_targets: Path,
        spark_full_report: dict[str, Any], tmp_path: Path) -> None:
    url = _database(spark_postgres, "archive_purged")
    archive = tmp_path / "archive"
    result = run_retention(RetentionRequest(url, before=parse_instant(CUTOFF, "cutoff"),
                                            archive=archive, pace=Pace.unpaced(3)))
    assert result.messages >= 5 and result.batches >= 2  # a real part of the history left
    live_only = _report(spark_session, JdbcSource(url, partitions=3), tmp_path / "live",
                        spark_hand_targets)
    assert live_only["totals"]["messages"] < spark_full_report["totals"]["messages"]

    out = tmp_path / "combined"
    combined = _report(spark_session, ArchiveSource(archive, JdbcSource(url, partitions=3)),
                       out, spark_hand_targets)
    assert combined["source"] == "jdbc+archive"
    assert _comparable(combined, out) == spark_full_report


def test_a_message_in_both_counts_once(
        spark_session: Any, spark_postgres: EmbeddedPostgres, spark_hand_targets: Path,
        spark_full_report: dict[str, Any], tmp_path: Path) -> None:
    """Every archived message is still live too (as after a run that died between archive and
    delete): the report still equals the full history's."""
    purged = _database(spark_postgres, "archive_copy")
    archive = tmp_path / "archive"
    run_retention(RetentionRequest(purged, before=parse_instant(CUTOFF, "cutoff"),
                                   archive=archive, pace=Pace.unpaced(3)))
    untouched = _database(spark_postgres, "archive_untouched")
    out = tmp_path / "both"
    both = _report(spark_session, ArchiveSource(archive, JdbcSource(untouched, partitions=2)),
                   out, spark_hand_targets)
    assert _comparable(both, out) == spark_full_report


def test_only_the_days_of_the_window_are_read(tmp_path: Path) -> None:
    for day in ("2026-02-27", "2026-03-01", "2026-03-02", "2026-03-03", "2026-03-05"):
        (tmp_path / f"day={day}").mkdir()
    (tmp_path / "day=garbage").mkdir()
    days = archive_days(tmp_path, parse_window("2026-03-01T12:00:00Z", "2026-03-03T00:00:00Z"))
    assert [d.name for d in days] == ["day=2026-03-01", "day=2026-03-02", "day=2026-03-03"]
    assert len(archive_days(tmp_path, parse_window(None, None))) == 5


def test_report_refuses_a_missing_archive(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    (tmp_path / "export" / "messages").mkdir(parents=True)
    (tmp_path / "export" / "events").mkdir()
    code = main(["report", "--out", str(tmp_path / "out"), "--input", str(tmp_path / "export"),
                 "--archive", str(tmp_path / "nowhere")])
    assert code == 2
    assert "--archive" in capsys.readouterr().err


def test_retention_command_imports_neither_spark_nor_pyarrow() -> None:
    code = ("import sys, history.retention_cli; "
            "sys.exit('pyspark' in sys.modules or 'pyarrow' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
