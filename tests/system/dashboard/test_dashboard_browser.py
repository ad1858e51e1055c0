"""The dashboard in a real browser: headless Debian Chromium (driven by Playwright) against
``rms serve`` running as a subprocess on a seeded database; the page shows the live counts, draws
the SLA charts, lists a dead letter and resends it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

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
class Seeded:
    app: str
    api_key: str
    topic: str
    dead_id: str


def seed(service: Service, database_url: str, unique: str) -> Seeded:
    """Through the HTTP API: 2 pending-send, 1 deleted, 2 sent, 1 done; then one sent made
    dead (delivery-exhausted) with SQL, as the recovery worker would after its budget."""
    name, topic = f"shop-{unique}", f"orders.{unique}"
    created = service.call("POST", "/v1/admin/apps", json={
        "name": name, "produce_topics": ["orders.*"], "consume_topics": ["orders.*"],
        "check_url_prefixes": [CHECK_URL]})
    key = created["api_key"]

    def message(path: str, n: int) -> str:
        body = {"topic": topic, "payload": {"order": n}, "check_url": CHECK_URL,
                "check_after_seconds": 3600}
        return str(service.call("POST", path, key, json=body)["message_id"])

    for n in range(3):
        message("/v1/messages", n)
    cancelled = message("/v1/messages", 3)
    service.call("POST", f"/v1/messages/{cancelled}/cancel", key)
    sent = [message("/v1/messages/send", n) for n in range(4, 7)]
    service.call("POST", f"/v1/messages/{sent[0]}/ack", key)
    asyncio.run(make_dead(database_url, sent[1]))
    return Seeded(name, key, topic, sent[1])


def _box(page: Any, table: str) -> dict[str, Any]:
    """How the table sits in its scroll box and card: ``inside`` (the box does not stick out of
    the card), ``scrolls`` (the box scrolls what it cannot show), ``hidden`` (pixels of the
    table that can be reached neither way)."""
    found: dict[str, Any] = page.evaluate("""(id) => {
        const table = document.getElementById(id);
        const box = table.parentElement, card = table.closest(".card");
        const b = box.getBoundingClientRect(), c = card.getBoundingClientRect();
        const style = getComputedStyle(box);
        const scrolls = box.scrollWidth > box.clientWidth + 1 &&
            ["auto", "scroll"].includes(style.overflowX);
        return { inside: b.left >= c.left - 0.5 && b.right <= c.right + 0.5,
                 scrolls: scrolls, fits: table.scrollWidth <= box.clientWidth + 1,
                 table: table.scrollWidth, box: box.clientWidth };
    }""", table)
    return found


def _fits(page: Any, table: str) -> bool:
    box = _box(page, table)
    return bool(box["inside"] and box["fits"])


def _cells(page: Any, app: str, topic: str) -> list[str]:
    row = page.locator(f'#live-table tr[data-app="{app}"][data-topic="{topic}"]')
    return [text.strip() for text in row.locator("td").all_inner_texts()]


@pytest.mark.timeout(90)
def test_dashboard_in_chromium(service: Service, database_url: str, unique: str,
                               tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"Debian chromium is not installed at {CHROMIUM}")
    from playwright.sync_api import expect

    seeded = seed(service, database_url, unique)
    before = service.call("GET", f"/v1/admin/messages/{seeded.dead_id}")
    assert before["dead"] is True

    problems: list[str] = []
    with chromium_page(problems) as page:
        page.on("console", lambda msg: problems.append(msg.text)
                if "Content Security Policy" in msg.text else None)
        page.goto(f"{service.base_url}/dashboard")
        expect(page.locator("#login")).to_be_visible()

        # a wrong token: the API answers 401 and the form comes back with the message
        page.fill("#token", "not-the-token")
        page.click("#login-form button[type=submit]")
        expect(page.locator("#login-error")).to_contain_text("admin token")
        expect(page.locator("#app")).to_be_hidden()

        page.fill("#token", ADMIN_TOKEN)
        page.click("#login-form button[type=submit]")
        expect(page.locator("#app")).to_be_visible()
        assert ADMIN_TOKEN not in page.url

        # live: app, topic, pending-send, sent, done, deleted, dead, two ages
        row = f'#live-table tr[data-app="{seeded.app}"][data-topic="{seeded.topic}"]'
        expect(page.locator(row)).to_be_visible()
        cells = _cells(page, seeded.app, seeded.topic)
        # app, topic, pending-send, sent, done, deleted, dead, scheduled, then the two ages
        assert cells[:8] == [seeded.app, seeded.topic, "3", "2", "1", "1", "1", "0"], cells
        assert cells[8].endswith(" s") and cells[9].endswith(" s"), cells

        # ... refreshing without a reload
        service.call("POST", "/v1/messages/send", seeded.api_key,
                     json={"topic": seeded.topic, "payload": {"late": True},
                           "check_url": CHECK_URL})
        expect(page.locator(row).locator("td").nth(3)).to_have_text("3", timeout=8000)

        # SLA charts: bars with a width, latency lines with a path
        bars = page.locator("#chart-outcomes svg rect.bar")
        expect(bars.first).to_be_attached()
        widths = [float(w or 0) for w in bars.evaluate_all(
            "nodes => nodes.map(n => n.getAttribute('width'))")]
        assert len(widths) == 15 and max(widths) > 0  # one bar per outcome counter
        compliance = page.locator("#chart-compliance svg rect.bar")
        expect(compliance).to_have_count(2)
        lines = page.locator("#chart-latency svg path.series")
        expect(lines).to_have_count(12)  # 4 stages x p50/p95/p99
        assert all(len(d or "") > 10 for d in lines.evaluate_all(
            "nodes => nodes.map(n => n.getAttribute('d'))"))
        expect(page.locator("#sla-table tbody tr")).to_have_count(2)
        consumers = page.locator("#consumers-sla-table tbody tr")
        expect(consumers).to_have_count(2)
        assert [t.strip() for t in consumers.nth(1).locator("td").all_inner_texts()] == [
            "shop", "orders.paid", "points", "28", "25", "3", "89.3%", "2", "1", "400 ms",
            "3.2 s", "8 s"]

        # dead letters: the dead message is listed; open it and resend
        dead_row = page.locator(f'#dead-table tr[data-id="{seeded.dead_id}"]')
        expect(dead_row).to_contain_text("delivery-exhausted")
        dead_row.click()
        expect(page.locator("#detail-dead")).to_have_text("yes")
        expect(page.locator("#detail-events li").first).to_be_visible()
        expect(page.locator("#action-confirm")).to_be_hidden()
        page.click("#action-resend")
        expect(page.locator("#action-result")).to_contain_text("Resent: delivery #2")
        expect(page.locator("#detail-dead")).to_have_text("no")
        expect(page.locator("#detail-events li[data-event=resent]")).to_be_visible()
        expect(dead_row).to_have_count(0)
        expect(page.locator(row).locator("td").nth(6)).to_have_text("0")
        page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)

        # the widest table fits its card at 1400 px; narrower, it scrolls inside the card
        assert _fits(page, "topics-table"), _box(page, "topics-table")
        page.set_viewport_size({"width": 700, "height": 900})
        narrow = _box(page, "topics-table")
        assert narrow["scrolls"] and narrow["inside"], narrow

    after = service.call("GET", f"/v1/admin/messages/{seeded.dead_id}")
    assert after["dead"] is False and after["dead_reason"] is None
    assert after["delivery_count"] == before["delivery_count"] + 1
    events = service.call("GET", f"/v1/admin/messages/{seeded.dead_id}/events")["events"]
    assert "resent" in [event["event"] for event in events]
    assert problems == []


def seed_transactions(service: Service, database_url: str, unique: str) -> tuple[str, list[str]]:
    """Three pending transactions of two messages each; the second one's check-backs ran out
    (dead, as the confirm worker leaves it)."""
    name = f"tx-{unique}"
    key = service.call("POST", "/v1/admin/apps", json={
        "name": name, "produce_topics": ["orders.*"], "consume_topics": ["orders.*"],
        "check_url_prefixes": [CHECK_URL]})["api_key"]
    ids = [f"tx{n}-{unique}" for n in range(3)]
    for transaction_id in ids:
        service.call("POST", "/v1/transactions", key, json={
            "transaction_id": transaction_id, "check_url": CHECK_URL,
            "check_after_seconds": 3600,
            "messages": [{"topic": f"orders.{unique}", "payload": {"n": n}} for n in range(2)]})
    asyncio.run(_sql(database_url, "UPDATE transactions SET dead = true, "
                     "dead_reason = 'check-exhausted', next_check_at = NULL "
                     "WHERE transaction_id = :id", id=ids[1]))
    return name, ids


async def _sql(database_url: str, statement: str, **params: Any) -> None:
    engine = create_async_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text(statement), params)
    finally:
        await engine.dispose()


@pytest.mark.timeout(180)
def test_transactions_panel_lists_and_resolves_in_chromium(
        service: Service, database_url: str, unique: str, tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"Debian chromium is not installed at {CHROMIUM}")
    from playwright.sync_api import expect

    app, ids = seed_transactions(service, database_url, unique)
    problems: list[str] = []
    with chromium_page(problems) as page:
        page.goto(f"{service.base_url}/dashboard")
        page.fill("#token", ADMIN_TOKEN)
        page.click("#login-form button[type=submit]")
        expect(page.locator("#app")).to_be_visible()

        # pending ones by default, oldest first; the dead one says so
        rows = page.locator("#tx-table tbody tr")
        expect(rows).to_have_count(3)
        assert rows.evaluate_all("rows => rows.map(r => r.dataset.id)") == ids
        dead = page.locator(f'#tx-table tr[data-id="{ids[1]}"]')
        expect(dead).to_contain_text("dead check-exhausted")
        cells = [t.strip() for t in dead.locator("td").all_inner_texts()]
        assert cells[1:5] == [app, "pending dead check-exhausted", "2", "0 of 15"], cells
        assert _fits(page, "tx-table"), _box(page, "tx-table")

        # confirm the dead one: it leaves the pending list, its messages are sent
        dead.locator("button[data-action=confirm]").click()
        expect(page.locator("#tx-result")).to_have_text(
            f"Confirmed {ids[1]}: state confirmed, 2 messages sent")
        expect(rows).to_have_count(2)
        # cancel another, after the browser's confirmation dialog
        page.once("dialog", lambda dialog: dialog.accept())
        page.locator(f'#tx-table tr[data-id="{ids[2]}"] button[data-action=cancel]').click()
        expect(page.locator("#tx-result")).to_have_text(
            f"Cancelled {ids[2]}: state cancelled, 2 messages deleted")
        expect(rows).to_have_count(1)

        # every state, filtered by app; no button on a resolved one
        page.select_option("#tx-filter-state", "")
        page.fill("#tx-filter-app", app)
        page.click("#tx-filters button[type=submit]")
        expect(rows).to_have_count(3)
        states = rows.evaluate_all("rows => rows.map(r => r.dataset.state)")
        assert states == ["pending", "confirmed", "cancelled"]
        expect(page.locator("#tx-table button")).to_have_count(2)
        page.select_option("#tx-filter-dead", "true")
        page.click("#tx-filters button[type=submit]")
        expect(page.locator("#tx-empty")).to_be_visible()
        page.screenshot(path=str(tmp_path / "transactions.png"), full_page=True)

    confirmed = service.call("GET", f"/v1/admin/transactions/{ids[1]}")
    assert (confirmed["state"], confirmed["dead"]) == ("confirmed", False)
    assert {m["state"] for m in confirmed["messages"]} == {"sent"}
    cancelled = service.call("GET", f"/v1/admin/transactions/{ids[2]}")
    assert {m["state"] for m in cancelled["messages"]} == {"deleted"}
    assert service.call("GET", f"/v1/admin/transactions/{ids[0]}")["state"] == "pending"
    assert problems == []
