"""The dashboard shell, its assets and the report summary endpoint, through the real app."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rms.config import Settings
from tests.support import Api
from tests.system.dashboard.summary_fixture import write_summary
from tests.system.dashboard.support import SUMMARY_PATH, serve_with_report_dir


@pytest.fixture
async def report_api(settings: Settings, tmp_path: Path) -> AsyncIterator[Api]:
    """The app with ``RMS_REPORT_DIR`` pointing at an (initially absent) folder."""
    async with serve_with_report_dir(settings, tmp_path / "report") as api:
        yield api


async def test_dashboard_is_a_static_shell_with_a_strict_policy(api: Api) -> None:
    response = await api.client.get("/dashboard")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert "unsafe-inline" not in policy
    assert response.headers["cache-control"] == "no-store"
    page = response.text
    assert '<script src="/dashboard/static/dashboard.js"' in page
    assert "<script>" not in page and "<style" not in page and " style=" not in page
    assert "http://" not in page and "https://" not in page  # nothing from the network


@pytest.mark.parametrize(("name", "media_type"), [
    ("index.html", "text/html"), ("dashboard.js", "text/javascript"),
    ("dashboard.css", "text/css"),
])
async def test_static_files_are_served(api: Api, name: str, media_type: str) -> None:
    response = await api.client.get(f"/dashboard/static/{name}")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith(media_type)
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.content


@pytest.mark.parametrize("name", ["secret.txt", "..%2Frouter.py", "__init__.py", "router.py"])
async def test_unknown_static_name_is_a_problem_404(api: Api, name: str) -> None:
    response = await api.client.get(f"/dashboard/static/{name}")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["status"] == 404


async def test_summary_needs_the_admin_token(report_api: Api) -> None:
    assert (await report_api.client.get(SUMMARY_PATH)).status_code == 401
    app = await report_api.create_app("viewer")
    response = await report_api.client.get(SUMMARY_PATH, headers=app.headers)
    assert response.status_code == 401
    assert response.json()["status"] == 401


async def test_summary_is_404_without_report_dir(api: Api) -> None:
    response = await api.client.get(SUMMARY_PATH, headers=api.admin)
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"].startswith("no report yet")


async def test_summary_is_404_before_the_first_report(report_api: Api) -> None:
    response = await report_api.client.get(SUMMARY_PATH, headers=report_api.admin)
    assert response.status_code == 404
    problem = response.json()
    assert problem["title"] == "Not found" and "rms report --out" in problem["detail"]


async def test_summary_serves_the_latest_report(report_api: Api) -> None:
    assert report_api.settings.report_dir is not None
    written = write_summary(Path(report_api.settings.report_dir))
    response = await report_api.client.get(SUMMARY_PATH, headers=report_api.admin)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.headers["cache-control"] == "no-store"
    assert response.json() == json.loads(json.dumps(written))
    assert response.json()["schema_version"] == 1


async def test_a_broken_summary_is_a_503_problem(report_api: Api) -> None:
    assert report_api.settings.report_dir is not None
    _write_half_a_summary(Path(report_api.settings.report_dir))
    response = await report_api.client.get(SUMMARY_PATH, headers=report_api.admin)
    assert response.status_code == 503
    assert response.json()["detail"] == "the report summary is not valid JSON"


def _write_half_a_summary(folder: Path) -> None:
    folder.mkdir()
    (folder / "summary.json").write_text("{not json", encoding="utf-8")


async def test_the_summary_endpoint_is_documented(api: Api) -> None:
    paths = (await api.client.get("/openapi.json")).json()["paths"]
    assert SUMMARY_PATH in paths
    assert "/dashboard" not in paths
