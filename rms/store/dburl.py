"""``RMS_DATABASE_URL``, read one way by every command: ``rms serve``, the workers,
``rms migrate``, ``rms topics``, ``rms retention``, ``rms export`` and the report.

Forms: ``postgresql+asyncpg://user:password@host:port/database`` (or ``postgresql://``,
``postgres://``) with libpq's query parameters:

- ``host=/run/postgresql`` (a directory: a Unix socket; ``postgresql+asyncpg://user@/rms?host=
  /run/postgresql``) and ``port``;
- TLS: ``sslmode`` (``disable`` ... ``verify-full``; asyncpg's ``ssl=true|false|<mode>`` is
  read as ``sslmode``), ``sslrootcert``, ``sslcert``, ``sslkey``;
- any other parameter is a PostgreSQL session setting (``application_name=...``).

:meth:`DatabaseUrl.dsn` is what asyncpg connects with (SQLAlchemy's engine, Alembic and the
archive jobs alike); :meth:`DatabaseUrl.jdbc` is what the report's JDBC read takes (the
password as a property, never inside the JDBC URL). A message about a URL never repeats it:
it may hold a password.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

SCHEMES = ("postgresql", "postgres", "postgresql+asyncpg", "postgres+asyncpg")
TLS_PARAMETERS = ("sslmode", "sslrootcert", "sslcert", "sslkey")
SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
_SSL_WORDS = {"true": "require", "1": "require", "false": "disable", "0": "disable"}
_FORM = "postgresql+asyncpg://user:password@host:port/database"


class DatabaseUrlError(ValueError):
    """``RMS_DATABASE_URL`` cannot be read (the message never repeats the URL)."""


@dataclass(frozen=True)
class JdbcTarget:
    url: str
    properties: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DatabaseUrl:
    host: str  # a host name or address, or a directory holding the Unix socket
    port: int
    database: str
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: dict[str, str] = field(default_factory=dict)  # sslmode, sslrootcert, sslcert, sslkey
    settings: dict[str, str] = field(default_factory=dict)  # PostgreSQL session settings

    @property
    def unix_socket(self) -> bool:
        return self.host.startswith("/")

    @property
    def location(self) -> str:
        """Where the server is, without user or password, for messages and logs."""
        if self.unix_socket:
            return f"{self.host}/.s.PGSQL.{self.port}/{self.database}"
        return f"{self.host}:{self.port}/{self.database}"

    def dsn(self) -> str:
        """The libpq-style URL asyncpg reads (TLS and socket parameters in its query)."""
        auth = ""
        if self.user:
            secret = f":{quote(self.password, safe='')}" if self.password else ""
            auth = f"{quote(self.user, safe='')}{secret}@"
        query: dict[str, str] = {}
        netloc_host = ""
        if self.unix_socket:
            query |= {"host": self.host, "port": str(self.port)}
        else:
            netloc_host = f"{_bracketed(self.host)}:{self.port}"
        query |= self.tls | self.settings
        suffix = f"?{urlencode(query, safe='/')}" if query else ""
        return f"postgresql://{auth}{netloc_host}/{quote(self.database, safe='')}{suffix}"

    def jdbc(self, application_name: str) -> JdbcTarget:
        """The PostgreSQL JDBC driver's URL and properties; a Unix socket cannot be read so."""
        if self.unix_socket:
            raise DatabaseUrlError(
                "the JDBC read cannot use the Unix socket of RMS_DATABASE_URL (host="
                f"{self.host}): pass --database-url with the server's TCP address, e.g. "
                f"postgresql://user@127.0.0.1:{self.port}/{self.database}")
        properties = {"driver": "org.postgresql.Driver", "ApplicationName": application_name}
        if self.user:
            properties["user"] = self.user
        if self.password:
            properties["password"] = self.password
        properties |= self.tls
        return JdbcTarget(
            f"jdbc:postgresql://{_bracketed(self.host)}:{self.port}/{quote(self.database, safe='')}",
            properties)

    def connector(self, **connect_args: Any) -> Callable[[], Awaitable[Any]]:
        """An ``async_creator`` for SQLAlchemy: asyncpg connections from :meth:`dsn`."""
        dsn = self.dsn()

        async def connect() -> Any:
            import asyncpg

            return await asyncpg.connect(dsn, **connect_args)

        return connect


def parse_database_url(text: str) -> DatabaseUrl:
    try:
        split = urlsplit(text.strip())
        if split.scheme not in SCHEMES:
            raise DatabaseUrlError(f"RMS_DATABASE_URL cannot be parsed: not of the form {_FORM} "
                                   "(postgresql:// serves too)")
        if "," in split.netloc:
            raise DatabaseUrlError("RMS_DATABASE_URL names several hosts: name one (or a "
                                   "load balancer in front of them)")
        port = split.port
        query = dict(parse_qsl(split.query, keep_blank_values=True))
    except ValueError as exc:
        if isinstance(exc, DatabaseUrlError):
            raise
        raise DatabaseUrlError(f"RMS_DATABASE_URL cannot be parsed: {_why(exc)}") from None
    host = query.pop("host", "") or split.hostname or "127.0.0.1"
    return DatabaseUrl(
        host=host,
        port=_port(query.pop("port", None), port),
        database=unquote(split.path.lstrip("/")) or "postgres",
        user=unquote(split.username) if split.username else None,
        password=unquote(split.password) if split.password else None,
        tls=_tls(query),
        settings=query,
    )


def database_location(text: str) -> str:
    """``host:port/database`` of the URL (or the socket's path), without user or password."""
    return parse_database_url(text).location


def _port(in_query: str | None, in_netloc: int | None) -> int:
    if in_query is None:
        return in_netloc or 5432
    if not in_query.isdigit() or not 0 < int(in_query) < 65536:
        raise DatabaseUrlError("RMS_DATABASE_URL cannot be parsed: its port is not a number")
    return int(in_query)


def _tls(query: dict[str, str]) -> dict[str, str]:
    """Pops the TLS parameters from ``query``; ``ssl`` is read as ``sslmode``."""
    ssl = query.pop("ssl", None)
    tls = {name: query.pop(name) for name in TLS_PARAMETERS if name in query}
    if ssl is not None and "sslmode" not in tls:
        tls["sslmode"] = _SSL_WORDS.get(ssl.lower(), ssl.lower())
    mode = tls.get("sslmode")
    if mode is not None and mode not in SSL_MODES:
        raise DatabaseUrlError(f"RMS_DATABASE_URL: sslmode must be one of {', '.join(SSL_MODES)}")
    return tls


def _why(exc: ValueError) -> str:
    if "port" in str(exc).lower() or "int()" in str(exc):
        return "its port is not a number"
    return f"not of the form {_FORM}"


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host
