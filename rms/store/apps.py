"""Apps (producers/consumers): registration, lookup by API key hash, key rotation."""

from __future__ import annotations

import builtins
from collections.abc import Collection
from typing import Any

from sqlalchemy import ARRAY, ColumnElement, Text, any_, bindparam, case, func, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.domain.apps import AppSpec, Credentials, DeliverySettings
from rms.domain.errors import Conflict, NotFound
from rms.domain.models import App
from rms.domain.secrets import hash_api_key, new_api_key, new_signing_secret
from rms.domain.topics import consume_regex
from rms.store.raw import RawStatement
from rms.store.rows import app_from, to_app
from rms.store.schema import apps


def _live_previous_secret() -> ColumnElement[Any]:
    """The previous signing secret while its overlap lasts (database clock), else NULL. A
    previous secret without a deadline (a rotation from before deadlines existed) stays."""
    expires = apps.c.previous_signing_secret_expires_at
    return case((or_(expires.is_(None), expires > func.now()), apps.c.previous_signing_secret),
                else_=None).label("previous_signing_secret")


# every read of an app: a previous secret past its overlap is never handed out
APP_COLUMNS: list[Any] = [
    *(column for column in apps.c if column.name != "previous_signing_secret"),
    _live_previous_secret(),
]


_APPS_NAMED = RawStatement(
    select(*APP_COLUMNS).where(apps.c.name == any_(bindparam("names", type_=ARRAY(Text)))),
    asyncpg_dialect())  # type: ignore[no-untyped-call]


_STALE_REGEXES = select(apps.c.name, apps.c.consume_topics).where(
    apps.c.consume_regex_of.is_distinct_from(apps.c.consume_topics))


class AppStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def create(self, spec: AppSpec, api_key: str | None = None) -> Credentials:
        """Register an app. ``api_key`` is for ``rms dev``'s well-known demo keys only."""
        key, secret = api_key or new_api_key(), new_signing_secret()
        statement = (
            pg_insert(apps)
            .values(
                name=spec.name,
                api_key_hash=hash_api_key(key),
                signing_secret=secret,
                produce_topics=list(spec.produce_topics),
                consume_topics=list(spec.consume_topics),
                consume_regex=consume_regex(spec.consume_topics),
                consume_regex_of=list(spec.consume_topics),
                check_url_prefixes=list(spec.check_url_prefixes),
                default_check_url=spec.default_check_url,
                ordered_topics=list(spec.ordered_topics),
                max_deliveries=spec.delivery.max_deliveries,
                ack_timeout_seconds=spec.delivery.ack_timeout_seconds,
            )
            .on_conflict_do_nothing(index_elements=["name"])
            .returning(*apps.c)
        )
        async with self._engine.begin() as conn:
            row = (await conn.execute(statement)).first()
        if row is None:
            raise Conflict(f"an app named {spec.name!r} already exists")
        return Credentials(to_app(row), key, secret)

    async def get(self, name: str) -> App:
        async with self._engine.connect() as conn:
            row = (await conn.execute(select(*APP_COLUMNS).where(apps.c.name == name))).first()
        if row is None:
            raise NotFound(f"no app named {name!r}")
        return to_app(row)

    async def get_many(self, names: Collection[str]) -> dict[str, App]:
        """The apps of ``names`` that exist, by name, in one statement on the driver
        connection (each batch of the ack-topic consumer reads its consumers' apps)."""
        if not names:
            return {}
        rows = await _APPS_NAMED.fetch(self._engine, names=list(names))
        return {app.name: app for app in map(app_from, rows)}

    async def list(self) -> list[App]:
        async with self._engine.connect() as conn:
            rows = (await conn.execute(select(*APP_COLUMNS).order_by(apps.c.name))).all()
        return [to_app(row) for row in rows]

    async def by_api_key(self, api_key: str) -> App | None:
        statement = select(*APP_COLUMNS).where(apps.c.api_key_hash == hash_api_key(api_key))
        async with self._engine.connect() as conn:
            row = (await conn.execute(statement)).first()
        return to_app(row) if row is not None else None

    async def repair_consume_regexes(self) -> builtins.list[str]:
        """Give every app whose ``consume_regex`` is not the one of its ``consume_topics`` (an
        app created, or its topics changed, by a process of an earlier release) the regex of
        its topics; returns their names. Each is written only while its topics are still the
        ones the regex was computed from, so a change made meanwhile is never overwritten."""
        async with self._engine.connect() as conn:
            stale = (await conn.execute(_STALE_REGEXES)).all()
        repaired = []
        for name, topics in stale:
            async with self._engine.begin() as conn:
                done = await conn.execute(
                    update(apps).where(apps.c.name == name, apps.c.consume_topics == topics)
                    .values(consume_regex=consume_regex(topics), consume_regex_of=topics))
            if done.rowcount:
                repaired.append(name)
        return repaired

    async def rotate_key(self, name: str, *, rotate_signing_secret: bool = False,
                         overlap_seconds: float = 86_400.0) -> Credentials:
        """New API key at once (the old one stops working). A rotated signing secret keeps the
        previous one for ``overlap_seconds`` (see :meth:`rotate_signing_secret`)."""
        key = new_api_key()
        values: dict[str, object] = {"api_key_hash": hash_api_key(key),
                                     "key_rotated_at": func.now()}
        if rotate_signing_secret:
            values |= _secret_rotation(new_signing_secret(), overlap_seconds)
        app = await self._update(name, values)
        return Credentials(app, key, app.signing_secret)

    async def rotate_signing_secret(self, name: str, overlap_seconds: float) -> App:
        """A new signing secret; the current one becomes the previous one and still signs
        check-backs for ``overlap_seconds`` (database clock). A second rotation within the
        overlap retires the older secret at once: at most two secrets sign at any time."""
        return await self._update(name, _secret_rotation(new_signing_secret(), overlap_seconds))

    async def set_check_url_prefixes(self, name: str, prefixes: tuple[str, ...]) -> App:
        """Replace the app's check-URL prefixes."""
        return await self._update(name, {"check_url_prefixes": list(prefixes)})

    async def set_ordered_topics(self, name: str, patterns: tuple[str, ...]) -> App:
        """Replace the app's ordered topics (messages prepared from now on follow them)."""
        return await self._update(name, {"ordered_topics": list(patterns)})

    async def set_delivery(self, name: str, settings: DeliverySettings) -> App:
        """Replace the app's own delivery settings (messages confirmed from now on follow
        them)."""
        return await self._update(name, {"max_deliveries": settings.max_deliveries,
                                         "ack_timeout_seconds": settings.ack_timeout_seconds})

    async def _update(self, name: str, values: dict[str, object]) -> App:
        statement = (update(apps).where(apps.c.name == name).values(**values)
                     .returning(*APP_COLUMNS))
        async with self._engine.begin() as conn:
            row = (await conn.execute(statement)).first()
        if row is None:
            raise NotFound(f"no app named {name!r}")
        return to_app(row)


def _secret_rotation(secret: str, overlap_seconds: float) -> dict[str, object]:
    return {
        "previous_signing_secret": apps.c.signing_secret,
        "signing_secret": secret,
        "previous_signing_secret_expires_at": func.now() + func.make_interval(
            0, 0, 0, 0, 0, 0, float(overlap_seconds)),
    }

