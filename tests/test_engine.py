"""The engine's sessions: settings PostgreSQL applies to every RMS connection."""

from __future__ import annotations

from sqlalchemy import text

from rms.config import Settings
from rms.store.database import create_engine


async def _show(settings: Settings, name: str) -> str:
    engine = create_engine(settings, pool_size=1)
    try:
        async with engine.connect() as conn:
            return str((await conn.execute(text(f"SHOW {name}"))).scalar_one())
    finally:
        await engine.dispose()


async def test_sessions_idle_in_a_transaction_are_ended_by_the_server(settings: Settings) -> None:
    assert await _show(settings, "idle_in_transaction_session_timeout") == "1min"
    quick = settings.model_copy(update={"db_idle_in_transaction_timeout_seconds": 2.5})
    assert await _show(quick, "idle_in_transaction_session_timeout") == "2500ms"
    never = settings.model_copy(update={"db_idle_in_transaction_timeout_seconds": 0})
    assert await _show(never, "idle_in_transaction_session_timeout") == "0"
    assert await _show(settings, "application_name") == "rms"
