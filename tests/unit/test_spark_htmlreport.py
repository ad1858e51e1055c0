"""The HTML report's wording and colours, from a summary.json (no Spark needed)."""

from __future__ import annotations

import re

from spark.htmlreport import render
from tests.system.dashboard.summary_fixture import summary


def test_empty_listings_read_none_and_full_ones_say_so() -> None:
    content = summary()
    content["stuck"] = {"total": 0, "items": []}
    page = render(content)
    assert "0 in all" not in page and "the first 0" not in page
    shown = len(content["dead"]["items"])
    if shown:
        assert f"{content['dead']['total']} in all" in page


def test_dead_is_red_and_done_green_in_the_per_hour_chart() -> None:
    page = render(summary())
    legend = dict(re.findall(r'fill="(#[0-9a-f]{6})"/><text[^>]*>(done|dead|cancelled)<', page))
    assert legend == {"#2f855a": "done", "#c53030": "dead", "#718096": "cancelled"}, legend


def test_dead_letters_have_human_column_headings() -> None:
    content = summary()
    item = {"dead_reason": "delivery-exhausted", "message_id": "m-1", "app": "orders",
            "topic": "orders.paid", "state": "sent", "created_at": "2026-03-02T08:00:00Z",
            "check_count": 0, "delivery_count": 6}
    content["dead"] = {"total": 3, "items": [item]}
    page = render(content)
    assert "3 in all; the first 1 are shown" in page
    assert "<th" in page and ">dead_reason<" not in page and ">check_count<" not in page
    assert ">check-backs<" in page and ">deliveries<" in page


def test_ratios_and_histograms_name_their_population() -> None:
    page = render(summary())
    assert ">check-backs / prepared msg<" in page and ">deliveries / published msg<" in page
    assert "Check-backs per prepared message" in page and "Deliveries per sent message" in page
