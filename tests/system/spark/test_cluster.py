"""The report on a real Spark cluster: a standalone master and two one-core workers on this
machine (``tests/system/spark/cluster.py``), ``rms report --master spark://...`` over JDBC (the
executors read PostgreSQL with the JDBC jar the driver ships them) and over Parquet, each run
spread over both workers' executors. Its outputs equal those of ``local[2]``. The executors
are given no usable Python: the report runs none on them (everything is Spark SQL)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from spark.summary import TABLE_FILES
from tests.integration.spark.history import AS_OF, SINCE, UNTIL, Report
from tests.system.spark.cluster import StandaloneCluster

pytestmark = [pytest.mark.spark, pytest.mark.slow]

NO_PYTHON = "/nonexistent/python"
CLUSTER_CONF = {
    "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
    "spark.executor.memory": "512m", "spark.executor.cores": "1",
    "spark.sql.shuffle.partitions": "3", "spark.ui.enabled": "false",
    "spark.pyspark.python": NO_PYTHON,
}


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(tmp_path_factory.mktemp("cluster"))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
    assert cluster.leftovers() == [], "the cluster left processes behind"


def _on_cluster(cluster: StandaloneCluster, out: Path, arguments: list[str]) -> dict[str, Any]:
    conf = [item for key, value in CLUSTER_CONF.items() for item in ("--conf", f"{key}={value}")]
    result = subprocess.run(
        [sys.executable, "-m", "rms.cli", "report", "--master", cluster.url, *conf,
         "--out", str(out), "--since", SINCE, "--until", UNTIL, "--as-of", AS_OF, *arguments],
        capture_output=True, text=True, check=False, timeout=300,  # a bound, not a speed check
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": NO_PYTHON})
    assert result.returncode == 0, result.stderr[-3000:]
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary


def _same_outputs(local: Path, cluster: Path) -> None:
    for filename in TABLE_FILES.values():
        assert pq.read_table(cluster / filename).equals(pq.read_table(local / filename)), filename

    def comparable(directory: Path) -> dict[str, Any]:
        summary = json.loads((directory / "summary.json").read_text())
        return {k: v for k, v in summary.items() if k != "generated_at"}

    assert comparable(cluster) == comparable(local)


@pytest.mark.timeout(660)
def test_report_on_a_standalone_cluster_equals_local(
        spark_cluster: StandaloneCluster, spark_hand_db: str, spark_hand_export: Path,
        spark_hand_targets: Path, spark_hand_reports: dict[str, Report], tmp_path: Path) -> None:
    """The same sources and settings as ``spark_hand_reports`` (``local[2]``)."""
    runs = {"jdbc": ["--database-url", spark_hand_db, "--jdbc-partitions", "3"],
            "parquet": ["--input", str(spark_hand_export)]}
    for name, arguments in runs.items():
        out = tmp_path / name
        summary = _on_cluster(spark_cluster, out, [*arguments, "--targets",
                                                   str(spark_hand_targets)])
        assert (summary["source"], summary["totals"]["messages"]) == (name, 37)
        _same_outputs(spark_hand_reports[name].out, out)
    applications = spark_cluster.state()["completedapps"]
    assert len(applications) == 2
    assert all(app["cores"] == 2 for app in applications), applications  # both workers
