"""The dashboard with several consumers per message, in headless Debian Chromium against
``rms serve``: a message's view lists its subscribers with each one's ack or its absence, the
live section shows the backlog per consumer from the stats, and the dead letters filter by the
consumer that owes them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.system.dashboard.browser import (
    ADMIN_TOKEN,
    CHECK_URL,
    CHROMIUM,
    Service,
    chromium_page,
    make_dead,
)

pytestmark = pytest.mark.browser


@dataclass
class Consumers:
    points: str
    invoicing: str
    topic: str
    owed: str  # sent, acked by points, owed by invoicing
    dead: str  # dead (delivery-exhausted), acked by invoicing, owed by points
    single: str  # confirmed before anyone consumed the topic: single-ack rule


def _app(service: Service, name: str, consume: list[str]) -> str:
    return str(service.call("POST", "/v1/admin/apps", json={
        "name": name, "produce_topics": ["orders.*"], "consume_topics": consume,
        "check_url_prefixes": [CHECK_URL]})["api_key"])


def seed(service: Service, database_url: str, unique: str) -> Consumers:
    """Through the HTTP API: a producer, then one message sent while no app consumes the topic
    (single-ack rule; points acks it later), then two consumer apps and two messages sent to
    both; points acks the first, invoicing the second, which is then made dead with SQL, as
    the recovery worker leaves it when its budget is spent."""
    topic = f"orders.{unique}"
    producer = _app(service, f"shop-{unique}", [])

    def send(n: int) -> str:
        return str(service.call("POST", "/v1/messages/send", producer, json={
            "topic": topic, "payload": {"order": n}, "check_url": CHECK_URL})["message_id"])

    single = send(0)
    names = Consumers(f"points-{unique}", f"invoicing-{unique}", topic, "", "", single)
    keys = {name: _app(service, name, ["orders.*"]) for name in (names.points, names.invoicing)}
    names.owed, names.dead = send(1), send(2)
    service.call("POST", f"/v1/messages/{single}/ack", keys[names.points])
    service.call("POST", f"/v1/messages/{names.owed}/ack", keys[names.points])
    service.call("POST", f"/v1/messages/{names.dead}/ack", keys[names.invoicing])
    asyncio.run(make_dead(database_url, names.dead))
    return names


def _consumers(page: Any) -> dict[str, str]:
    """The message view's consumers: app -> its ``data-acked``."""
    found: dict[str, str] = page.locator("#detail-consumers li").evaluate_all(
        "items => Object.fromEntries(items.map(i => [i.dataset.app, i.dataset.acked]))")
    return found


@pytest.mark.timeout(120)
def test_consumers_backlog_and_dead_letters_per_consumer(
        service: Service, database_url: str, unique: str, tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"Debian chromium is not installed at {CHROMIUM}")
    from playwright.sync_api import expect

    seeded = seed(service, database_url, unique)
    problems: list[str] = []
    with chromium_page(problems) as page:
        page.goto(f"{service.base_url}/dashboard")
        page.fill("#token", ADMIN_TOKEN)
        page.click("#login-form button[type=submit]")
        expect(page.locator("#app")).to_be_visible()

        # the backlog: each consumer owes one message (invoicing the sent one, points the dead)
        for consumer in (seeded.points, seeded.invoicing):
            row = page.locator(f'#backlog-table tr[data-consumer="{consumer}"]')
            expect(row).to_be_visible()
            cells = [t.strip() for t in row.locator("td").all_inner_texts()]
            assert cells[:2] == [consumer, "1"] and cells[2].endswith(" s"), cells

        # a message's view: points acked it (when, via http), invoicing still owes its ack
        page.fill("#open-id", seeded.owed)
        page.click("#open-button")
        expect(page.locator("#detail-id")).to_have_text(seeded.owed)
        expect(page.locator("#detail-consumers li")).to_have_count(2)
        assert _consumers(page) == {seeded.invoicing: "false", seeded.points: "true"}
        acked = page.locator(f'#detail-consumers li[data-app="{seeded.points}"]')
        expect(acked).to_contain_text("via http")
        expect(page.locator(f'#detail-consumers li[data-app="{seeded.invoicing}"]')) \
            .to_contain_text("owes its ack")

        # the single-ack rule: no subscribers, the app that acked it named
        page.fill("#open-id", seeded.single)
        page.click("#open-button")
        expect(page.locator("#detail-id")).to_have_text(seeded.single)
        expect(page.locator("#detail-consumers-rule")).to_contain_text("single ack")
        assert _consumers(page) == {seeded.points: "true"}

        # dead letters by consumer: points owes the dead one, invoicing owes none
        dead_row = page.locator(f'#dead-table tr[data-id="{seeded.dead}"]')
        expect(dead_row).to_be_visible()
        page.fill("#filter-consumer", seeded.invoicing)
        page.click("#dead-filters button[type=submit]")
        expect(page.locator("#dead-empty")).to_be_visible()
        expect(dead_row).to_have_count(0)
        page.fill("#filter-consumer", seeded.points)
        page.click("#dead-filters button[type=submit]")
        expect(dead_row).to_be_visible()
        expect(page.locator("#dead-table tbody tr")).to_have_count(1)
        dead_row.click()
        expect(page.locator("#detail-id")).to_have_text(seeded.dead)
        assert _consumers(page) == {seeded.invoicing: "true", seeded.points: "false"}
        page.screenshot(path=str(tmp_path / "consumers.png"), full_page=True)
    assert problems == []
