"""The database URL as the report and the archive jobs take it: read by the one reading of
``RMS_DATABASE_URL`` (:mod:`rms.store.dburl`), its errors turned into usage errors.

The report's JDBC read carries the TLS parameters (``sslmode``, ``sslrootcert``, ``sslcert``,
``sslkey``) as driver properties and the password as a property, never inside the JDBC URL,
so Spark's plan and logs do not show it. It cannot use a Unix socket: the error says to pass
the server's TCP address with ``--database-url``.
"""

from __future__ import annotations

from history.options import ReportError, UsageError
from rms.store.dburl import DatabaseUrl, DatabaseUrlError, JdbcTarget, parse_database_url

__all__ = ["JdbcTarget", "asyncpg_dsn", "check_connection", "jdbc_target", "parsed"]
PREFLIGHT_SECONDS = 15.0


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


def check_connection(url: str) -> None:
    """One connection with the URL's settings, TLS included, before a job that reads through
    another driver starts (Spark's JDBC read names only a failed connection): a server
    certificate the CA does not sign, a wrong password or an unreachable host becomes
    :class:`ReportError` with one line naming the cause."""
    import asyncio

    import asyncpg

    from rms.store.database import connect_failure

    async def connect() -> None:
        connection = await asyncpg.connect(parsed(url).dsn(), timeout=PREFLIGHT_SECONDS)
        await connection.close()

    try:
        asyncio.run(connect())
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise ReportError(connect_failure(url, exc)) from None
