"""A dependency outage logged once: the first failure as a warning with its cause, the failures
that follow only counted, the recovery as one line with how long it lasted. A worker ticking
every second through a PostgreSQL restart would otherwise write a traceback every second."""

from __future__ import annotations

import time

import asyncpg
import structlog
from aiokafka.errors import KafkaError
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from rms import metrics

log = structlog.get_logger(__name__)
# what a lost, restarting or overloaded PostgreSQL raises (as opposed to a refused statement)
DATABASE_UNAVAILABLE = (DBAPIError, PoolTimeout, asyncpg.InterfaceError,
                        asyncpg.PostgresConnectionError,
                        asyncpg.exceptions.OperatorInterventionError)


_CLIENTS = {"asyncpg": "database", "sqlalchemy": "database", "aiokafka": "kafka"}
CAUSES = ("database", "kafka", "other")


def cause_of(exc: BaseException) -> str:
    """``database``, ``kafka`` or ``other`` (a bug: logged with its traceback). A refused or
    lost connection (``OSError``) is told apart by the client library it came out of."""
    if isinstance(exc, DATABASE_UNAVAILABLE):
        return "database"
    if isinstance(exc, KafkaError):
        return "kafka"
    if isinstance(exc, OSError | TimeoutError):
        return _raised_in(exc) or "other"
    return "other"


def _raised_in(exc: BaseException) -> str | None:
    """The client library of the deepest frame that belongs to one."""
    found = None
    trace = exc.__traceback__
    while trace is not None:
        package = str(trace.tb_frame.f_globals.get("__name__", "")).split(".", 1)[0]
        found = _CLIENTS.get(package, found)
        trace = trace.tb_next
    return found


class OutageLog:
    """The failures of one loop (a worker's tick, the ack consumer) in a row."""

    def __init__(self, component: str) -> None:
        self.component = component
        self.since: float | None = None
        self.failures = 0
        self._causes: set[str] = set()
        # exported from the start: a loop that has never failed shows 0, and a process that
        # stopped being scraped shows nothing (the RMSWorkersMissing alert)
        metrics.LOOP_FAILING.labels(component=component).set(0)
        for cause in CAUSES:
            metrics.LOOP_FAILURES.labels(component=component, cause=cause)

    def failed(self, exc: BaseException) -> None:
        cause = cause_of(exc)
        metrics.LOOP_FAILURES.labels(component=self.component, cause=cause).inc()
        metrics.LOOP_FAILING.labels(component=self.component).set(1)
        self.failures += 1
        if self.since is None:
            self.since = time.monotonic()
        if cause in self._causes:
            return
        self._causes.add(cause)
        error = f"{type(exc).__name__}: {exc}"[:500]
        if cause == "other":
            log.exception("loop.failing", component=self.component, cause=cause, error=error)
        else:
            log.warning("loop.failing", component=self.component, cause=cause, error=error)

    def succeeded(self) -> None:
        if self.since is None:
            return
        log.info("loop.recovered", component=self.component, failures=self.failures,
                 after_seconds=round(time.monotonic() - self.since, 1))
        metrics.LOOP_FAILING.labels(component=self.component).set(0)
        self.since, self.failures, self._causes = None, 0, set()
