"""An exhausted database pool answers 503 problem documents after RMS_DB_POOL_TIMEOUT_SECONDS
instead of leaving requests hanging, and the API recovers when connections come back."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from tests.integration.api.helpers import assert_problem
from tests.integration.security.conftest import ApiFactory


async def test_pool_exhaustion_is_503_then_recovers(api_with: ApiFactory, topic: str) -> None:
    async with api_with(db_pool_size=1, db_max_overflow=0,
                        db_pool_timeout_seconds=0.3) as (api, app):
        producer = await api.create_app("producer")
        message_id = await api.prepared_id(producer, topic)
        engine: AsyncEngine = app.state.engine
        async with engine.connect():  # the only connection, held by someone else
            for method, path, headers in [
                ("GET", f"/v1/messages/{message_id}", producer.headers),
                ("POST", f"/v1/messages/{message_id}/confirm", producer.headers),
                ("GET", "/v1/admin/stats", api.admin),
            ]:
                response = await api.client.request(method, path, headers=headers)
                body = assert_problem(response, 503, contains="database")
                assert body["type"].endswith("/unavailable")
                assert response.headers["retry-after"] == "1"
            # readiness reports the database as not ready rather than hanging
            assert_problem(await api.client.get("/readyz"), 503, contains="database")
        found = await api.client.get(f"/v1/messages/{message_id}", headers=producer.headers)
        assert found.status_code == 200, found.text
        assert found.json()["state"] == "pending-send"  # the refused confirm changed nothing
