"""The RMS database URL (``postgresql+asyncpg://user:pass@host:port/db?ssl=require``, or plain
``postgresql://``) turned into what asyncpg and the PostgreSQL JDBC driver take.

Only the query parameters both drivers understand are carried over: ``sslmode`` (and asyncpg's
``ssl=true|false|<mode>``, mapped to ``sslmode``). The password travels as a JDBC property,
never inside the JDBC URL, so Spark's plan and logs do not show it.
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


@dataclass(frozen=True)
class _Parts:
    host: str
    port: int
    database: str
    user: str | None
    password: str | None
    sslmode: str | None


def _parts(url: str) -> _Parts:
    split = urlsplit(url)
    if split.scheme.split("+", 1)[0] not in {"postgresql", "postgres"}:
        raise UsageError("the database URL must be a postgresql:// URL")
    try:
        port = split.port or 5432
    except ValueError:
        raise UsageError("the database URL has an invalid port") from None
    query = dict(parse_qsl(split.query))
    ssl = query.get("sslmode") or query.get("ssl")
    return _Parts(
        host=split.hostname or "127.0.0.1",
        port=port,
        database=unquote(split.path.lstrip("/")) or "postgres",
        user=unquote(split.username) if split.username else None,
        password=unquote(split.password) if split.password else None,
        sslmode=_SSL_WORDS.get(ssl.lower(), ssl) if ssl else None,
    )


def _host(parts: _Parts) -> str:
    return f"[{parts.host}]" if ":" in parts.host else parts.host


def asyncpg_dsn(url: str) -> str:
    parts = _parts(url)
    auth = ""
    if parts.user:
        secret = f":{quote(parts.password, safe='')}" if parts.password else ""
        auth = f"{quote(parts.user, safe='')}{secret}@"
    query = f"?{urlencode({'sslmode': parts.sslmode})}" if parts.sslmode else ""
    database = quote(parts.database, safe="")
    return f"postgresql://{auth}{_host(parts)}:{parts.port}/{database}{query}"


def jdbc_target(url: str) -> JdbcTarget:
    parts = _parts(url)
    properties = {"driver": "org.postgresql.Driver", "ApplicationName": "rms-report"}
    if parts.user:
        properties["user"] = parts.user
    if parts.password:
        properties["password"] = parts.password
    if parts.sslmode:
        properties["sslmode"] = parts.sslmode
    return JdbcTarget(f"jdbc:postgresql://{_host(parts)}:{parts.port}/{parts.database}",
                      properties)
