"""The dashboard endpoint serves what the real ``rms report`` writes: the Spark job over the
hand-written history of ``tests/integration/spark/history.py``, stored in this test's database."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rms.config import Settings
from tests.integration.spark.history import AS_OF, SINCE, UNTIL, hand_history, store
from tests.system.dashboard.summary_fixture import summary as fixture_summary
from tests.system.dashboard.support import SUMMARY_PATH, serve_with_report_dir

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[3]


def _run_report(database_url: str, out: Path) -> None:
    store(database_url.replace("postgresql+asyncpg://", "postgresql://"), hand_history())
    result = subprocess.run(
        [sys.executable, "-m", "rms.cli", "report", "--out", str(out),
         "--database-url", database_url, "--since", SINCE, "--until", UNTIL, "--as-of", AS_OF,
         "--master", "local[1]", "--conf", "spark.ui.enabled=false",
         "--conf", "spark.sql.shuffle.partitions=1"],
        cwd=out.parent, capture_output=True, text=True, check=False, timeout=240,
        env=os.environ | {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable})
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.timeout(300)
async def test_the_real_report_summary_is_served(settings: Settings, database_url: str,
                                                 tmp_path: Path) -> None:
    await asyncio.to_thread(_run_report, database_url, tmp_path / "report")
    async with serve_with_report_dir(settings, tmp_path / "report") as api:
        response = await api.client.get(SUMMARY_PATH, headers=api.admin)
    assert response.status_code == 200
    summary = response.json()
    assert summary["schema_version"] == 1 and summary["source"] == "jdbc"
    assert summary["totals"]["messages"] == 37
    assert summary["hours"] and summary["topics"]
    assert set(summary["hours"][0]["stages"]) == set(summary["stages"])
    # the browser test's hand-made summary has exactly the real report's shape
    assert _shape(fixture_summary()) == _shape(summary)


def _shape(value: Any) -> Any:
    """Keys all the way down (lists by their first item), without the values."""
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in value.items()
                if key not in ("items", "by_kind", "by_dead_reason")}
    if isinstance(value, list):
        return [_shape(value[0])] if value and isinstance(value[0], dict | list) else []
    return None
