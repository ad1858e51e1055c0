"""``GET /dashboard`` (a static shell that holds no data), its assets, and
``GET /v1/admin/report/summary`` (the latest ``rms report`` summary.json).

The page authenticates in the browser: it asks for the admin token, keeps it in
sessionStorage and sends it as a bearer token to the admin API, so serving the shell itself
needs no authentication and no cookie (no CSRF surface). A strict Content-Security-Policy
allows only the page's own script and style sheet.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import anyio
import orjson
from fastapi import APIRouter
from fastapi.responses import Response

from message_service.api.messages import ERRORS
from message_service.deps import AdminActor, ServicesDep
from message_service.strict_json import StrictJsonRoute
from rms.domain.errors import NotFound, Unavailable

STATIC_DIR = Path(__file__).parent / "static"
ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "dashboard.js": "text/javascript; charset=utf-8",
    "format.js": "text/javascript; charset=utf-8",
    "draw.js": "text/javascript; charset=utf-8",
    "report.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
}
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
SUMMARY_FILE = "summary.json"

router = APIRouter(route_class=StrictJsonRoute)


@cache
def _asset(name: str) -> bytes:
    """Assets ship inside the package and never change while the process runs."""
    return (STATIC_DIR / name).read_bytes()


def _static(name: str, cache_control: str) -> Response:
    headers = SECURITY_HEADERS | {"Cache-Control": cache_control}
    return Response(_asset(name), media_type=ASSETS[name], headers=headers)


@router.get("/dashboard", include_in_schema=False)
async def dashboard() -> Response:
    """The ops dashboard page (HTML shell; its data comes from the admin API)."""
    return _static("index.html", "no-store")


@router.get("/dashboard/static/{name}", include_in_schema=False)
async def dashboard_asset(name: str) -> Response:
    """One of the dashboard's own files; nothing else on disk is reachable."""
    if name not in ASSETS:
        raise NotFound(f"no dashboard file named {name!r}")
    return _static(name, "no-cache")


@router.get("/v1/admin/report/summary", tags=["admin"], responses=ERRORS)
async def report_summary(_: AdminActor, wired: ServicesDep) -> Response:
    """The latest SLA report's summary.json (written by ``rms report --out RMS_REPORT_DIR``)."""
    report_dir = wired.settings.report_dir
    if report_dir is None:
        raise NotFound("no report yet: RMS_REPORT_DIR is not set")
    path = Path(report_dir) / SUMMARY_FILE
    try:
        content = await anyio.to_thread.run_sync(path.read_bytes)
    except FileNotFoundError:
        raise NotFound(f"no report yet: run `rms report --out {report_dir}`") from None
    except OSError as exc:
        raise Unavailable(f"cannot read the report summary: {exc.strerror}") from None
    try:
        orjson.loads(content)
    except orjson.JSONDecodeError:
        raise Unavailable("the report summary is not valid JSON") from None
    return Response(content, media_type="application/json",
                    headers={"Cache-Control": "no-store"})
