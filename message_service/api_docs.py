"""``/docs``: Swagger UI served from the ``swagger-ui-bundle`` package, so the API's
interactive documentation works on a host without internet access (FastAPI's default page
loads its scripts from a CDN)."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from swagger_ui_bundle import swagger_ui_path

from rms.domain.errors import NotFound

ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon-32x32.png": "image/png",
}
PREFIX = "/docs/static"


def install(app: FastAPI) -> None:
    router = APIRouter(include_in_schema=False)

    @router.get("/docs")
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} - API",
            swagger_js_url=f"{PREFIX}/swagger-ui-bundle.js",
            swagger_css_url=f"{PREFIX}/swagger-ui.css",
            swagger_favicon_url=f"{PREFIX}/favicon-32x32.png")

    @router.get(PREFIX + "/{name}")
    async def asset(name: str) -> Response:
        if name not in ASSETS:
            raise NotFound(f"no documentation file named {name!r}")
        content = (swagger_ui_path / name).read_bytes()
        return Response(content, media_type=ASSETS[name],
                        headers={"Cache-Control": "public, max-age=86400"})

    app.include_router(router)
