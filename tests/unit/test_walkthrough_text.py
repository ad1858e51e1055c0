"""The walkthrough's text is read as requests and shown answers (tests/system/release/walkthrough.py):
what it sends, and that an answer that differs from the one shown is caught."""

from __future__ import annotations

from tests.system.release.walkthrough import (
    mismatches,
    shown_values,
    steps,
    walkthrough_block,
)

BLOCK = """API=http://127.0.0.1:8000
# 1. prepare
curl -s -X POST $API/v1/messages -H "$ORDERS" -H 'Content-Type: application/json' -d '{
  "message_id": "m-1", "topic": "t"}'
# → 201 {"message_id":"m-1","state":"pending-send","dead":false,"check_count":0,
#        "payload":{...},"next_check_at":"<created_at + 10 s>","events":[]}
#   (a remark: "state":"sent" is not part of the answer)
curl -s "$API/v1/admin/messages?state=sent&limit=10" -H "$ADMIN"
# → 200 {"items":[{"state":"sent"},{"state":"done"}],"next_cursor":null}
"""


def test_the_readme_has_the_walkthrough_between_its_markers() -> None:
    walked = steps(walkthrough_block())
    assert walked[0].method == "POST" and walked[0].path == "/v1/messages"
    assert walked[0].body["topic"] == "orders.paid"
    assert {step.caller for step in walked} == {"ORDERS", "POINTS", "ADMIN"}


def test_a_command_its_body_and_its_shown_answer_are_read() -> None:
    prepare, listing = steps(BLOCK)
    assert (prepare.method, prepare.path, prepare.caller, prepare.status) == (
        "POST", "/v1/messages", "ORDERS", 201)
    assert prepare.body == {"message_id": "m-1", "topic": "t"}
    assert shown_values(prepare.shown) == {"message_id": ["m-1"], "state": ["pending-send"],
                                           "dead": [False], "check_count": [0]}
    assert (listing.method, listing.path, listing.status) == (
        "GET", "/v1/admin/messages?state=sent&limit=10", 200)


def test_an_answer_that_differs_from_the_shown_one_is_caught() -> None:
    _, listing = steps(BLOCK)
    answer = {"items": [{"state": "sent"}, {"state": "done"}], "next_cursor": None}
    assert mismatches(listing.shown, answer) == []
    assert mismatches(listing.shown, {**answer, "next_cursor": "c1"})
    assert mismatches(listing.shown, {**answer, "items": [{"state": "done"}, {"state": "sent"}]})
    assert mismatches(listing.shown, {"items": [{"state": "sent"}], "next_cursor": None})
