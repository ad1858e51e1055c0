"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from message_service.deps import ServicesDep
from message_service.problems import problem
from message_service.strict_json import StrictJsonRoute

router = APIRouter(route_class=StrictJsonRoute, tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "a dependency is down"}})
async def readyz(wired: ServicesDep) -> Response:
    """The database and the broker are reachable."""
    down = await wired.health.unreachable()
    if not down:
        return Response(b'{"status":"ready","database":"ok","broker":"ok"}',
                        media_type="application/json")
    return problem(503, "Not ready", f"unreachable: {', '.join(down)}", "not-ready")


@router.get("/metrics")
async def prometheus(wired: ServicesDep) -> Response:
    """Prometheus metrics of this process."""
    await wired.health.refresh_gauges()
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

