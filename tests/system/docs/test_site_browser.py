"""The built site in a real browser: headless Debian Chromium opens the start page and the
HTTP API reference, finds their headings and the generated operations, and saves a
screenshot of each (in the test's folder, or in RMS_DOCS_SCREENSHOTS when it is set)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.system.dashboard.browser import CHROMIUM, chromium_page
from tests.system.deploy.tools import checker_missing
from tests.system.docs.site import served

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _heading(text: str) -> str:
    """A heading's text without its permalink sign."""
    return text.removesuffix("¶").strip()


def _screenshots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("RMS_DOCS_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_the_start_page_and_the_api_reference_show_their_headings(
        site: Path, tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        checker_missing(f"Debian chromium is not installed at {CHROMIUM}")
    problems: list[str] = []
    screenshots = _screenshots(tmp_path)
    with served(site) as base_url, chromium_page(problems) as page:
        page.goto(f"{base_url}/")
        assert _heading(page.locator("article h1").first.inner_text()).startswith("RMS")
        assert page.title().startswith("RMS")
        page.screenshot(path=str(screenshots / "docs-start.png"))

        page.goto(f"{base_url}/reference/http-api/")
        assert _heading(page.locator("article h1").first.inner_text()) == "HTTP API"
        headings = [_heading(text) for text in page.locator("article h3").all_inner_texts()]
        assert "POST /v1/messages" in headings
        assert any("/v1/messages/{message_id}/confirm" in heading for heading in headings)
        assert page.locator("#schema-preparerequest").count() == 1
        page.screenshot(path=str(screenshots / "docs-http-api.png"))
    assert not problems, problems
