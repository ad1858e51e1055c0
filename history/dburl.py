"""The database URL as the report and the archive jobs take it: read by the one reading of
``RMS_DATABASE_URL`` (:mod:`rms.store.dburl`), its errors turned into usage errors.

The report's JDBC read carries the TLS parameters (``sslmode``, ``sslrootcert``, ``sslcert``,
``sslkey``) as driver properties and the password as a property, never inside the JDBC URL,
so Spark's plan and logs do not show it. It cannot use a Unix socket: the error says to pass
the server's TCP address with ``--database-url``.
"""

from __future__ import annotations

from history.options import UsageError
from rms.store.dburl import DatabaseUrl, DatabaseUrlError, JdbcTarget, parse_database_url

__all__ = ["JdbcTarget", "asyncpg_dsn", "jdbc_target", "parsed"]


def parsed(url: str) -> DatabaseUrl:
    try:
        return parse_database_url(url)
    except DatabaseUrlError as exc:
        raise UsageError(str(exc)) from None


def asyncpg_dsn(url: str) -> str:
    return parsed(url).dsn()


def jdbc_target(url: str) -> JdbcTarget:
    try:
        return parsed(url).jdbc("rms-report")
    except DatabaseUrlError as exc:
        raise UsageError(str(exc)) from None
