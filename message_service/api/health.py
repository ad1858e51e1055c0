"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from message_service.problems import problem
from message_service.strict_json import StrictJsonRoute
from rms import metrics
from rms.kafka.publisher import broker_reachable

router = APIRouter(route_class=StrictJsonRoute, tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "a dependency is down"}})
async def readyz(request: Request) -> Response:
    """The database and the broker are reachable."""
    state = request.app.state
    database = await _database_ok(state.engine)
    broker = await broker_reachable(state.publisher)
    if database and broker:
        return Response(b'{"status":"ready","database":"ok","broker":"ok"}',
                        media_type="application/json")
    down = [name for name, ok in (("database", database), ("broker", broker)) if not ok]
    return problem(503, "Not ready", f"unreachable: {', '.join(down)}", "not-ready")


@router.get("/metrics")
async def prometheus(request: Request) -> Response:
    """Prometheus metrics of this process."""
    pending, unacked = await request.app.state.services.admin.oldest_ages()
    metrics.OLDEST_PENDING_SEND.set(pending or 0)
    metrics.OLDEST_UNACKED.set(unacked or 0)
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


async def _database_ok(engine: object) -> bool:
    try:
        async with engine.connect() as conn:  # type: ignore[attr-defined]
            await conn.execute(text("SELECT 1"))
    except Exception:  # any failure means not ready
        return False
    return True
