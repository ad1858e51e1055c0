"""``rms report`` and ``rms export`` from the command line: bad arguments answer with a message
and exit code 2 (never a traceback), failures with exit code 1, and a real run works both as
``rms report`` and under ``spark-submit``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from history.export import ExportRequest, export
from history.options import parse_window
from rms.cli import main
from rms.devstack.embedded import free_port
from tests.integration.spark.history import AS_OF, SINCE, TARGETS_TOML, UNTIL

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def spark_no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RMS_DATABASE_URL", "RMS_JDBC_JAR"):
        monkeypatch.delenv(name, raising=False)


def _closed_url() -> str:
    return f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"


def test_commands_do_not_import_spark() -> None:
    code = ("import sys, spark.cli, history.export_cli; "
            "sys.exit('pyspark' in sys.modules or 'pyarrow' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=False).returncode == 0


@pytest.mark.usefixtures("spark_no_env")
@pytest.mark.parametrize(("arguments", "message"), [
    (["--since", "yesterday"], "--since: 'yesterday' is not an ISO 8601 time"),
    (["--since", "2026-03-02T11:00Z", "--until", "2026-03-02T10:00Z"], "earlier"),
    (["--as-of", "soon", "--input", "{export}"], "--as-of"),
    (["--source", "parquet"], "needs --input"),
    (["--input", "{tmp}"], "not an `rms export` directory (no messages, events/)"),
    (["--source", "jdbc", "--input", "{export}"], "only for --source parquet"),
    ([], "set RMS_DATABASE_URL or pass --database-url"),
    (["--database-url", "mysql://x/y"], "postgresql://"),
    (["--database-url", "postgresql://x/y", "--jdbc-jar", "/nowhere/pg.jar"], "does not exist"),
    (["--input", "{export}", "--targets", "{tmp}/absent.toml"], "cannot read"),
    (["--input", "{export}", "--conf", "spark.sql.shuffle.partitions"], "KEY=VALUE"),
])
def test_report_usage_errors(arguments: list[str], message: str, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "export" / "messages").mkdir(parents=True)
    (tmp_path / "export" / "events").mkdir()
    filled = [a.format(tmp=tmp_path, export=tmp_path / "export") for a in arguments]
    assert main(["report", "--out", str(tmp_path / "out"), *filled]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rms report: ") and message in err
    assert "Traceback" not in err


@pytest.mark.parametrize("arguments", [
    ["report"],  # --out is required
    ["report", "--out", "x", "--grace", "-1"],
    ["report", "--out", "x", "--jdbc-partitions", "0"],
    ["report", "--out", "x", "--source", "kafka"],
    ["export", "--out", "x", "--batch-size", "none"],
])
def test_argparse_errors_exit_2(arguments: list[str],
                                capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(arguments)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.usefixtures("spark_no_env")
def test_export_usage_and_failures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--out", str(tmp_path / "a")]) == 2
    assert "RMS_DATABASE_URL" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "file").write_text("x")
    assert main(["export", "--out", str(tmp_path / "full"), "--database-url",
                 _closed_url()]) == 2
    assert "not empty" in capsys.readouterr().err
    assert main(["export", "--out", str(tmp_path / "b"), "--database-url", _closed_url()]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rms export: export failed") and "Traceback" not in err
    assert not (tmp_path / "b").exists()


@pytest.mark.spark
def test_unreachable_database_exits_1(spark_session: Any, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Runs in-process on the suite's session, which the command borrows and leaves running."""
    code = main(["report", "--out", str(tmp_path), "--database-url", _closed_url()])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("rms report: the report failed:")
    assert "Traceback" not in err
    assert spark_session.range(1).count() == 1


@pytest.mark.spark
def test_rms_report_on_an_export(spark_session: Any, spark_hand_db: str, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The whole command on an ``rms export`` (in-process, on the borrowed session): "now" is
    the export's snapshot time."""
    export(ExportRequest(spark_hand_db, tmp_path / "export", parse_window(SINCE, UNTIL)))
    out = tmp_path / "report"
    assert main(["report", "--input", str(tmp_path / "export"), "--out", str(out)]) == 0
    assert capsys.readouterr().out.startswith("rms report: 37 messages, 6 stuck, 3 dead")
    summary = json.loads((out / "summary.json").read_text())
    manifest = json.loads((tmp_path / "export" / "_export.json").read_text())
    assert summary["as_of"] == manifest["exported_at"]
    assert sorted(p.name for p in out.iterdir()) == [
        "consumers.parquet", "daily.parquet", "hourly.parquet", "report.html", "stuck.parquet",
        "summary.json", "topics.parquet"]


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_spark_submit_over_jdbc(spark_hand_db: str, spark_jdbc_jar: Path,
                                tmp_path: Path) -> None:
    """The job under spark-submit, in its own JVM, the driver jar passed with --jars."""
    targets = tmp_path / "targets.toml"
    targets.write_text(TARGETS_TOML)
    out = tmp_path / "report"
    result = subprocess.run(
        [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]",
         "--jars", str(spark_jdbc_jar), "--conf", "spark.ui.enabled=false",
         str(ROOT / "spark" / "job.py"), "--database-url", spark_hand_db, "--since", SINCE,
         "--until", UNTIL, "--as-of", AS_OF, "--targets", str(targets), "--out", str(out),
         "--jdbc-partitions", "2"],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=280,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
             "PYSPARK_DRIVER_PYTHON": sys.executable})
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["source"], summary["totals"]["messages"], summary["stuck"]["total"]) == (
        "jdbc", 37, 4)
    assert summary["totals"]["sla_compliance"] == 25 / 31


@pytest.mark.timeout(300)
def test_rms_report_prints_its_one_line_and_no_jvm_noise(spark_hand_export: Path,
                                                         tmp_path: Path) -> None:
    """In its own process (the JVM starts here): no log4j, native-code or Spark start-up line
    comes before, or after, the result."""
    result = subprocess.run(
        [sys.executable, "-m", "rms.cli", "report", "--input", str(spark_hand_export),
         "--since", SINCE, "--until", UNTIL, "--as-of", AS_OF, "--out", str(tmp_path / "out"),
         "--master", "local[1]"],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=280,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rms report: "), result.stdout


def test_only_the_jvm_start_up_notices_are_dropped() -> None:
    from spark.session import forward_lines

    lines = [b"WARNING: Using incubator modules: jdk.incubator.vector\n",
             b"26/11/26 09:34:38 WARN NativeCodeLoader: Unable to load native-hadoop library "
             b"for your platform... using builtin-java classes where applicable\n",
             b"Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties\n",
             b'Setting default log level to "WARN".\n',
             b"To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use "
             b"setLogLevel(newLevel).\n",
             b"26/11/26 09:35:01 ERROR Executor: Exception in task 0.0\n",
             b"WARNING: something else\n", b"\xff odd bytes\n"]
    kept: list[str] = []
    forward_lines(lines, kept.append)
    assert kept == ["26/11/26 09:35:01 ERROR Executor: Exception in task 0.0\n",
                    "WARNING: something else\n", "\ufffd odd bytes\n"]
