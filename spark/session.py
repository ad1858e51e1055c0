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

When this process starts the JVM, the JVM's standard error goes through a filter that drops
its start-up notices (the incubator-module warning, the native-Hadoop notice, Spark's
default log4j banner and its notices about the driver's address and ports), so ``rms report``
prints its one-line result and nothing before it; every other line (warnings and errors of the
run) passes through unchanged.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from history.options import UsageError

APP_NAME = "rms-report"
DEFAULT_JDBC_JAR = Path("/usr/share/java/postgresql.jar")

# what the JVM and Spark print when a local driver starts: nothing an operator acts on
START_UP_NOISE = (
    re.compile(r"^WARNING: Using incubator modules: "),
    re.compile(r" WARN NativeCodeLoader: Unable to load native-hadoop library"),
    re.compile(r"^Using Spark's default log4j profile: "),
    re.compile(r'^Setting default log level to "'),
    re.compile(r"^To adjust logging level use sc\.setLogLevel\("),
    # the driver's address: the host name resolves to a loopback address (local mode needs no
    # other), and a port already taken by another driver on the machine (the next one is used)
    re.compile(r" WARN Utils: Your hostname, .* resolves to a loopback address"),
    re.compile(r" WARN Utils: Set SPARK_LOCAL_IP if you need to bind to another address"),
    re.compile(r" WARN Utils: Service '[^']+' could not bind on port \d+\. Attempting port "),
)


def is_start_up_noise(line: str) -> bool:
    return any(pattern.search(line) for pattern in START_UP_NOISE)


def forward_lines(lines: Iterable[bytes], write: Any) -> None:
    """Every line but the start-up notices, as it comes."""
    for raw in lines:
        line = raw.decode("utf-8", errors="replace")
        if not is_start_up_noise(line):
            write(line)


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


def _start_quiet_jvm(conf: dict[str, str]) -> None:
    """Start the JVM gateway with its standard error filtered (see the module docstring);
    nothing when a gateway exists already (a session started before, or ``spark-submit``)."""
    from subprocess import PIPE

    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    spark_conf = SparkConf(loadDefaults=False).setAppName(APP_NAME)
    for key, value in conf.items():
        spark_conf.set(key, value)
    gateway = launch_gateway(spark_conf, popen_kwargs={"stderr": PIPE})  # type: ignore[no-untyped-call]
    process = gateway.proc
    if process is not None and process.stderr is not None:
        def write(line: str) -> None:
            sys.stderr.write(line)
            sys.stderr.flush()

        threading.Thread(target=forward_lines, args=(iter(process.stderr.readline, b""), write),
                         name="jvm-stderr", daemon=True).start()
    SparkContext._ensure_initialized(gateway=gateway)


def build_session(settings: SessionSettings) -> Any:
    from pyspark.sql import SparkSession

    if settings.launched_here:
        _start_quiet_jvm(session_conf(settings))
    builder = SparkSession.builder.appName(APP_NAME)
    for key, value in session_conf(settings).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(settings.log_level)
    return spark


# read by `rms report` and `rms export` themselves, not a setting of the RMS processes
JDBC_JAR_VARIABLE = "RMS_JDBC_JAR"


def jdbc_jar(given: str | None) -> Path | None:
    """``--jdbc-jar``, else ``RMS_JDBC_JAR``, else Debian's jar when installed."""
    text = given or os.environ.get(JDBC_JAR_VARIABLE)
    if text:
        path = Path(text)
        if not path.is_file():
            raise UsageError(f"JDBC driver jar {text!r} does not exist")
        return path
    return DEFAULT_JDBC_JAR if DEFAULT_JDBC_JAR.is_file() else None


def spark_conf(pairs: list[str] | None) -> dict[str, str]:
    """``--conf key=value`` pairs, as ``spark-submit`` takes them."""
    conf: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--conf {pair!r}: expected KEY=VALUE")
        conf[key.strip()] = value
    return conf
