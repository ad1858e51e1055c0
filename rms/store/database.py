"""Engine creation. Pool sizing and timeouts come from Settings, passed in by the caller."""

from __future__ import annotations

import orjson
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from rms.config import Settings


def normalise_url(url: str) -> str:
    """Accept plain ``postgresql://`` URLs too and use the asyncpg driver."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix):]
    return url


def _json_dumps(value: object) -> str:
    return orjson.dumps(value).decode()


def create_engine(settings: Settings, *, pool_size: int | None = None) -> AsyncEngine:
    """One engine per process. ``pool_timeout`` bounds the wait so overload answers 503."""
    return create_async_engine(
        normalise_url(settings.database_url),
        pool_size=pool_size or settings.db_pool_size,
        max_overflow=settings.db_max_overflow,
        pool_timeout=settings.db_pool_timeout_seconds,
        pool_pre_ping=False,
        pool_recycle=1800,
        # every use is an `engine.begin()` / `engine.connect()` block, which commits or rolls
        # back its own transaction on exit: the pool's extra ROLLBACK per checkin is a wasted
        # round trip on every request
        pool_reset_on_return=None,
        connect_args={"server_settings": {"application_name": "rms"}},
        json_serializer=_json_dumps,
        json_deserializer=orjson.loads,
    )
