"""``RMS_DATABASE_URL``, read one way by every command: ``rms serve``, the workers,
``rms migrate``, ``rms topics``, ``rms retention``, ``rms export`` and the report.

Forms: ``postgresql+asyncpg://user:password@host:port/database`` (or ``postgresql://``,
``postgres://``) with libpq's query parameters:

- ``host=/run/postgresql`` (a directory: a Unix socket; ``postgresql+asyncpg://user@/rms?host=
  /run/postgresql``) and ``port``;
- several servers, for a primary with standbys that fails over: libpq's
  ``postgresql://user@h1:5432,h2:5432/rms`` or SQLAlchemy's ``postgresql+asyncpg://user@/rms?
  host=h1:5432&host=h2:5432``, with ``target_session_attrs=read-write`` (or ``primary``) so
  that a connection lands on the writable one (the JDBC read: ``targetServerType=primary``);
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
# target_session_attrs RMS accepts, and the JDBC driver's targetServerType for each
_SESSION_ATTRS = {"read-write": "primary", "primary": "primary", "any": "any"}


class DatabaseUrlError(ValueError):
    """``RMS_DATABASE_URL`` cannot be read (the message never repeats the URL)."""


@dataclass(frozen=True)
class JdbcTarget:
    url: str
    properties: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DatabaseUrl:
    # (host name or address, port), tried in turn; or one directory holding the Unix socket
    hosts: tuple[tuple[str, int], ...]
    database: str
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: dict[str, str] = field(default_factory=dict)  # sslmode, sslrootcert, sslcert, sslkey
    settings: dict[str, str] = field(default_factory=dict)  # PostgreSQL session settings
    session_attrs: str | None = None  # target_session_attrs: read-write, primary or any

    @property
    def host(self) -> str:
        return self.hosts[0][0]

    @property
    def port(self) -> int:
        return self.hosts[0][1]

    @property
    def unix_socket(self) -> bool:
        return self.host.startswith("/")

    @property
    def location(self) -> str:
        """Where the server is, without user or password, for messages and logs."""
        if self.unix_socket:
            return f"{self.host}/.s.PGSQL.{self.port}/{self.database}"
        return f"{self._netloc_hosts()}/{self.database}"

    def dsn(self) -> str:
        """The libpq-style URL asyncpg reads (TLS and socket parameters in its query)."""
        auth = ""
        if self.user:
            secret = f":{quote(self.password, safe='')}" if self.password else ""
            auth = f"{quote(self.user, safe='')}{secret}@"
        query: dict[str, str] = {}
        netloc_hosts = ""
        if self.unix_socket:
            query |= {"host": self.host, "port": str(self.port)}
        else:
            netloc_hosts = self._netloc_hosts()
        query |= self.tls | self.settings
        if self.session_attrs:
            query["target_session_attrs"] = self.session_attrs
        suffix = f"?{urlencode(query, safe='/')}" if query else ""
        return f"postgresql://{auth}{netloc_hosts}/{quote(self.database, safe='')}{suffix}"

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
        if self.session_attrs:
            properties["targetServerType"] = _SESSION_ATTRS[self.session_attrs]
        return JdbcTarget(
            f"jdbc:postgresql://{self._netloc_hosts()}/{quote(self.database, safe='')}",
            properties)

    def connector(self, **connect_args: Any) -> Callable[[], Awaitable[Any]]:
        """An ``async_creator`` for SQLAlchemy: asyncpg connections from :meth:`dsn`."""
        dsn = self.dsn()

        async def connect() -> Any:
            import asyncpg

            return await asyncpg.connect(dsn, **connect_args)

        return connect

    def _netloc_hosts(self) -> str:
        return ",".join(f"{_bracketed(host)}:{port}" for host, port in self.hosts)


def parse_database_url(text: str) -> DatabaseUrl:
    try:
        split = urlsplit(text.strip())
        if split.scheme not in SCHEMES:
            raise DatabaseUrlError(f"RMS_DATABASE_URL cannot be parsed: not of the form {_FORM} "
                                   "(postgresql:// serves too)")
        pairs = parse_qsl(split.query, keep_blank_values=True)
    except ValueError as exc:
        if isinstance(exc, DatabaseUrlError):
            raise
        raise DatabaseUrlError(f"RMS_DATABASE_URL cannot be parsed: {_why(exc)}") from None
    userinfo, _, netloc_hosts = split.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    query = {name: value for name, value in pairs if name != "host"}
    named = [value for name, value in pairs if name == "host" and value]
    return DatabaseUrl(
        hosts=_hosts(netloc_hosts, named, query.pop("port", None)),
        database=unquote(split.path.lstrip("/")) or "postgres",
        user=unquote(user) if user else None,
        password=unquote(password) if password else None,
        tls=_tls(query),
        session_attrs=_session_attrs(query.pop("target_session_attrs", None)),
        settings=query,
    )


def _hosts(netloc_hosts: str, named: list[str],
           port_parameter: str | None) -> tuple[tuple[str, int], ...]:
    """The servers of the URL: ``h1:p1,h2:p2`` in its authority, ``host=`` parameters (each
    ``h:p``, or a socket directory), the ``port`` parameter as the default port."""
    default = _port(port_parameter) if port_parameter is not None else 5432
    sockets = [value for value in named if value.startswith("/")]
    if sockets:
        if len(named) > 1 or netloc_hosts:
            raise DatabaseUrlError("RMS_DATABASE_URL: a Unix socket directory (host=/...) "
                                   "cannot be combined with other hosts")
        return ((sockets[0], default),)
    given = [part for part in netloc_hosts.split(",") if part] + named
    return tuple(_host_port(part, default) for part in given) or (("127.0.0.1", default),)


def _host_port(text: str, default: int) -> tuple[str, int]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port``."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, _, port = text.partition(":")
    return unquote(host) or "127.0.0.1", _port(port) if port else default


def _session_attrs(value: str | None) -> str | None:
    if value is not None and value not in _SESSION_ATTRS:
        raise DatabaseUrlError(f"RMS_DATABASE_URL: target_session_attrs {value!r}: use "
                               f"{', '.join(_SESSION_ATTRS)} (RMS needs the writable server)")
    return value


def database_location(text: str) -> str:
    """``host:port/database`` of the URL (or the socket's path), without user or password."""
    return parse_database_url(text).location


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise DatabaseUrlError("RMS_DATABASE_URL cannot be parsed: its port is not a number")
    return int(text)


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
