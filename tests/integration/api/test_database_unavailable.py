"""A database that is down or restarting answers 503 (retry), never 500: the SQLSTATEs
PostgreSQL and asyncpg give while it restarts (57P03 cannot connect now, found by the fault
suite), after pg_terminate_backend (57P01), a crash (57P02) or a lost connection (class 08)."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.exc import DBAPIError

from message_service import problems


class _DriverError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(f"sqlstate {sqlstate}")
        self.sqlstate = sqlstate


async def _answer(sqlstate: str) -> httpx.Response:
    app = FastAPI()
    problems.install(app)

    @app.get("/boom")
    async def boom() -> None:
        raise DBAPIError("SELECT 1", None, _DriverError(sqlstate))

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://rms.test") as client:
        return await client.get("/boom")


@pytest.mark.parametrize("sqlstate", ["57P03", "57P01", "57P02", "08006", "08003"])
async def test_database_unavailable_is_503_with_retry_after(sqlstate: str) -> None:
    response = await _answer(sqlstate)
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "1"
    assert response.json()["type"].endswith("/unavailable")


async def test_other_database_errors_stay_500() -> None:
    response = await _answer("42P01")  # undefined table: a bug, not an outage
    assert response.status_code == 500
    assert "Traceback" not in response.text
