"""The app under test with ``RMS_REPORT_DIR`` set (the shared ``api`` fixture leaves it unset)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from message_service.app import create_app
from rms.config import Settings
from tests.support import Api

SUMMARY_PATH = "/v1/admin/report/summary"


@asynccontextmanager
async def serve_with_report_dir(settings: Settings, report_dir: Path) -> AsyncIterator[Api]:
    configured = settings.model_copy(update={"report_dir": str(report_dir)})
    assert configured.admin_token is not None
    app = create_app(configured)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://rms.test") as client:
            yield Api(client, configured.admin_token, configured)
