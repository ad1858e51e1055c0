"""The SparkSession of a report. Without ``--master`` (and outside ``spark-submit``) Spark runs
in ``local[*]``; ``--master``, ``--driver-memory`` and ``--conf key=value`` take the usual Spark
settings, and ``spark-submit`` settings win when it launched the job.

Fixed settings: the session time zone is UTC (hours and days are UTC buckets) and the console
progress bar is off. On a local master (when this process starts the JVM) the shuffle uses two
partitions per core and the driver, which is also the executor, half the memory available
(machine or cgroup, 1-32 GiB), unless ``--conf spark.sql.shuffle.partitions=N`` or
``--driver-memory`` say otherwise: Spark's 200 partitions and 1 GiB suit neither a laptop nor
exact percentiles over millions of messages. The JDBC jar goes on ``spark.jars``;
under ``spark-submit`` pass it with ``--jars`` instead (the driver's class path is fixed before
this code runs).
"""

from __future__ import annotations

import contextlib
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


def _memory_limit() -> int | None:
    """Bytes this process may use: the machine's memory, or its cgroup's limit if lower."""
    limits = []
    with contextlib.suppress(ValueError, OSError):
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            limits.append(int(text))
    return min(limits) if limits else None


def default_driver_memory() -> str:
    """Half of the memory available, between 1 GiB and 32 GiB: a local run is the whole job."""
    limit = _memory_limit()
    mib = 1024 if limit is None else limit // 2 // (1024 * 1024)
    return f"{min(max(mib, 1024), 32 * 1024)}m"


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
        if not settings.driver_memory:  # Spark's 1g is too small for exact percentiles
            conf["spark.driver.memory"] = default_driver_memory()
    return conf | settings.conf | {"spark.sql.session.timeZone": "UTC"}


def build_session(settings: SessionSettings) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(APP_NAME)
    for key, value in session_conf(settings).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(settings.log_level)
    return spark
