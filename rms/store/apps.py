"""Apps (producers/consumers): registration, lookup by API key hash, key rotation."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.domain.errors import Conflict, NotFound
from rms.domain.models import App
from rms.domain.secrets import hash_api_key, new_api_key, new_signing_secret
from rms.store.rows import to_app
from rms.store.schema import apps


@dataclass(frozen=True, slots=True)
class AppSpec:
    name: str
    produce_topics: tuple[str, ...]
    consume_topics: tuple[str, ...]
    check_url_prefixes: tuple[str, ...]
    default_check_url: str | None = None


@dataclass(frozen=True, slots=True)
class Credentials:
    """Shown once, at creation or rotation."""

    app: App
    api_key: str
    signing_secret: str


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
                check_url_prefixes=list(spec.check_url_prefixes),
                default_check_url=spec.default_check_url,
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
            row = (await conn.execute(select(apps).where(apps.c.name == name))).first()
        if row is None:
            raise NotFound(f"no app named {name!r}")
        return to_app(row)

    async def list(self) -> list[App]:
        async with self._engine.connect() as conn:
            rows = (await conn.execute(select(apps).order_by(apps.c.name))).all()
        return [to_app(row) for row in rows]

    async def by_api_key(self, api_key: str) -> App | None:
        statement = select(apps).where(apps.c.api_key_hash == hash_api_key(api_key))
        async with self._engine.connect() as conn:
            row = (await conn.execute(statement)).first()
        return to_app(row) if row is not None else None

    async def rotate_key(self, name: str, *, rotate_signing_secret: bool = False) -> Credentials:
        """New API key at once (the old one stops working). A rotated signing secret keeps the
        previous one, so producers verify both until they switch."""
        key = new_api_key()
        values: dict[str, object] = {"api_key_hash": hash_api_key(key),
                                     "key_rotated_at": func.now()}
        if rotate_signing_secret:
            values["previous_signing_secret"] = apps.c.signing_secret
            values["signing_secret"] = new_signing_secret()
        statement = update(apps).where(apps.c.name == name).values(**values).returning(*apps.c)
        async with self._engine.begin() as conn:
            row = (await conn.execute(statement)).first()
        if row is None:
            raise NotFound(f"no app named {name!r}")
        app = to_app(row)
        return Credentials(app, key, app.signing_secret)

