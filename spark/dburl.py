"""The RMS database URL (``postgresql+asyncpg://user:pass@host:port/db?ssl=require``, or plain
``postgresql://``) turned into what asyncpg and the PostgreSQL JDBC driver take.

Only the query parameters both drivers understand are carried over: ``sslmode`` (and asyncpg's
``ssl=true|false|<mode>``, mapped to ``sslmode``) and, for a server that fails over,
``target_session_attrs`` (``read-write`` or ``primary``: the JDBC driver's
``targetServerType=primary``). Several hosts are given libpq's way
(``postgresql://user@h1:5432,h2:5432/rms``) or SQLAlchemy's (``postgresql+asyncpg://user@/rms?
host=h1:5432&host=h2:5432``); both drivers try them in turn. The password travels as a JDBC
property, never inside the JDBC URL, so Spark's plan and logs do not show it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from spark.options import UsageError

_SSL_WORDS = {"true": "require", "1": "require", "false": "disable", "0": "disable"}


@dataclass(frozen=True)
class JdbcTarget:
    url: str
    properties: dict[str, str] = field(default_factory=dict)


_SESSION_ATTRS = {"read-write": "primary", "primary": "primary", "any": "any"}


@dataclass(frozen=True)
class _Parts:
    hosts: tuple[tuple[str, int], ...]
    database: str
    user: str | None
    password: str | None
    sslmode: str | None
    session_attrs: str | None  # target_session_attrs: read-write, primary or any


def _parts(url: str) -> _Parts:
    split = urlsplit(url)
    if split.scheme.split("+", 1)[0] not in {"postgresql", "postgres"}:
        raise UsageError("the database URL must be a postgresql:// URL")
    pairs = parse_qsl(split.query)
    query = dict(pairs)
    ssl = query.get("sslmode") or query.get("ssl")
    attrs = query.get("target_session_attrs")
    if attrs is not None and attrs not in _SESSION_ATTRS:
        raise UsageError(f"target_session_attrs {attrs!r}: use read-write, primary or any")
    userinfo, _, netloc = split.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    named = [_host_port(value) for key, value in pairs if key == "host"]
    given = [_host_port(part) for part in netloc.split(",") if part]
    return _Parts(
        hosts=tuple(given + named) or (("127.0.0.1", 5432),),
        database=unquote(split.path.lstrip("/")) or "postgres",
        user=unquote(user) if user else None,
        password=unquote(password) if password else None,
        sslmode=_SSL_WORDS.get(ssl.lower(), ssl) if ssl else None,
        session_attrs=attrs,
    )


def _host_port(text: str) -> tuple[str, int]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port``."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, _, port = text.partition(":")
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise UsageError("the database URL has an invalid port")
    return unquote(host) or "127.0.0.1", int(port) if port else 5432


def _hosts(parts: _Parts) -> str:
    return ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in parts.hosts)


def asyncpg_dsn(url: str) -> str:
    parts = _parts(url)
    auth = ""
    if parts.user:
        secret = f":{quote(parts.password, safe='')}" if parts.password else ""
        auth = f"{quote(parts.user, safe='')}{secret}@"
    params = {"sslmode": parts.sslmode, "target_session_attrs": parts.session_attrs}
    kept = {k: v for k, v in params.items() if v}
    query = f"?{urlencode(kept)}" if kept else ""
    database = quote(parts.database, safe="")
    return f"postgresql://{auth}{_hosts(parts)}/{database}{query}"


def jdbc_target(url: str) -> JdbcTarget:
    parts = _parts(url)
    properties = {"driver": "org.postgresql.Driver", "ApplicationName": "rms-report"}
    if parts.user:
        properties["user"] = parts.user
    if parts.password:
        properties["password"] = parts.password
    if parts.sslmode:
        properties["sslmode"] = parts.sslmode
    if parts.session_attrs:
        properties["targetServerType"] = _SESSION_ATTRS[parts.session_attrs]
    return JdbcTarget(f"jdbc:postgresql://{_hosts(parts)}/{parts.database}", properties)
