"""``/docs`` works without internet access: the page loads Swagger UI from RMS itself."""

from __future__ import annotations

import re

from tests.support import Api


async def test_docs_reference_only_local_assets_and_they_are_served(api: Api) -> None:
    page = await api.client.get("/docs")
    assert page.status_code == 200
    urls = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert urls and all(url.startswith("/") and not url.startswith("//") for url in urls), urls
    assert "cdn" not in page.text.lower()
    for url in urls:
        asset = await api.client.get(url)
        assert asset.status_code == 200, url
        assert len(asset.content) > 500, url
    assert (await api.client.get("/docs/static/../app.py")).status_code == 404
    assert (await api.client.get("/docs/static/index.html")).status_code == 404
