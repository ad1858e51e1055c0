"""The SparkSession of a report. Without ``--master`` (and outside ``spark-submit``) Spark runs
in ``local[*]``; ``--master``, ``--driver-memory`` and ``--conf key=value`` take the usual Spark
settings, and ``spark-submit`` settings win when it launched the job.

Fixed settings: the session time zone is UTC (hours and days are UTC buckets) and the console
progress bar is off. On a local master (when this process starts the JVM) the shuffle uses two
partitions per core unless ``--conf spark.sql.shuffle.partitions=N`` says otherwise: Spark's
200 suit a cluster, not one machine. Memory stays Spark's default (1 GiB of driver heap) unless
``--driver-memory`` says otherwise: the report's aggregations and sorts spill to disk, so its
memory does not grow with the history. The JDBC jar goes on ``spark.jars``; under
``spark-submit`` pass it with ``--jars`` instead (the driver's class path is fixed before this
code runs).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

APP_NAME = "rms-report"


@dataclass(frozen=True)
class SessionSettings:
    master: str | None = None
    driver_memory: str | None = None
    jdbc_jar: Path | None = None
    conf: dict[str, str] = field(default_factory=dict)
    log_level: str = "WARN"
    launched_here: bool = True  # False under spark-submit: its master is not ours to guess


def local_cores(master: str | None) -> int | None:
    """Cores of a ``local``, ``local[N]``, ``local[N,F]`` or ``local[*]`` master; None for a
    cluster. No master means ``local[*]``, Spark's default when this process starts the JVM."""
    master = master or "local[*]"
    if master == "local":
        return 1
    match = re.fullmatch(r"local\[(\*|\d+)(,\d+)?\]", master)
    if match is None:
        return None
    if match.group(1) == "*":
        return os.cpu_count() or 1
    return int(match.group(1))


def session_conf(settings: SessionSettings) -> dict[str, str]:
    conf = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.debug.maxToStringFields": "1000",  # wide aggregates: no truncation warning
    }
    if settings.master:
        conf["spark.master"] = settings.master
    if settings.driver_memory:
        conf["spark.driver.memory"] = settings.driver_memory
    if settings.jdbc_jar:
        conf["spark.jars"] = str(settings.jdbc_jar)
    cores = local_cores(settings.master) if settings.launched_here else None
    if cores is not None:  # 200 shuffle partitions is a cluster's default, slow on one machine
        conf["spark.sql.shuffle.partitions"] = str(max(2, 2 * cores))
    return conf | settings.conf | {"spark.sql.session.timeZone": "UTC"}


def build_session(settings: SessionSettings) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(APP_NAME)
    for key, value in session_conf(settings).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(settings.log_level)
    return spark
