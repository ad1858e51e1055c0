"""What the browser tests of the dashboard share: ``rms serve`` as a subprocess (the
``service`` fixture of ``conftest.py``) and a headless Debian Chromium page."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
ADMIN_TOKEN = "browser-admin-token"
CHECK_URL = "http://127.0.0.1:1/check"
ROOT = Path(__file__).resolve().parents[3]


@dataclass
class Service:
    base_url: str
    client: httpx.Client

    @property
    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {ADMIN_TOKEN}"}

    def call(self, method: str, path: str, token: str = ADMIN_TOKEN, **kwargs: Any) -> Any:
        response = self.client.request(method, path, headers={"Authorization": f"Bearer {token}"},
                                       **kwargs)
        assert response.status_code in (200, 201), response.text
        return response.json()


def wait_ready(client: httpx.Client, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"rms serve exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            if client.get("/readyz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    pytest.fail("rms serve did not become ready in 30 s")


@contextmanager
def chromium_page(problems: list[str]) -> Iterator[Any]:
    """A 1400x900 page of headless Debian Chromium; page errors are added to ``problems``."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
            yield page
        finally:
            browser.close()


async def make_dead(database_url: str, message_id: str) -> None:
    """Flags a sent message dead (delivery-exhausted) with SQL, as the recovery worker leaves
    it when its delivery budget is spent."""
    engine = create_async_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text(
                "UPDATE messages SET dead = true, dead_reason = 'delivery-exhausted', "
                "next_delivery_at = NULL WHERE message_id = :id"), {"id": message_id})
    finally:
        await engine.dispose()
