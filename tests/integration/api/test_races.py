"""Concurrent actors on one message: the guarded UPDATE lets exactly one win (design 3)."""

from __future__ import annotations

import asyncio
from collections import Counter

from tests.integration.api.helpers import events, stored
from tests.support import Api, read_topic

MESSAGES = 10
CALLS_EACH = 25


async def test_concurrent_confirm_and_cancel_have_one_winner(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    ids = [await api.prepared_id(app, topic, message_id=f"race-{i}") for i in range(MESSAGES)]
    winners: dict[str, str] = {}
    for index, message_id in enumerate(ids):
        order = ["confirm", "cancel"] if index % 2 == 0 else ["cancel", "confirm"]
        actions = [order[n % 2] for n in range(2 * CALLS_EACH)]
        responses = await asyncio.gather(*(
            api.post(app, f"/v1/messages/{message_id}/{action}") for action in actions))
        final = (await api.client.get(f"/v1/messages/{message_id}",
                                      headers=app.headers)).json()["state"]
        assert final in {"sent", "deleted"}
        winning_action = "confirm" if final == "sent" else "cancel"
        winners[message_id] = winning_action
        for action, response in zip(actions, responses, strict=True):
            if action == winning_action:
                assert response.status_code == 200, response.text
                assert response.json()["state"] == final
            else:
                assert response.status_code == 409, response.text
                assert response.json()["current_state"] == final
        history = Counter(e["event"] for e in await events(api, message_id))
        if final == "sent":
            assert history["confirmed"] == 1 and history["cancelled"] == 0, history
            assert history["published"] == 1, history
        else:
            assert history["cancelled"] == 1 and history["confirmed"] == 0, history
            assert history["published"] == 0, history

    confirmed = sorted(m for m, w in winners.items() if w == "confirm")
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic,
                               expect=len(confirmed), timeout=10.0, settle=3.0)
    published = sorted(dict(r.headers)["rms-message-id"].decode() for r in records)
    # exactly one record per confirmed message; none for a cancelled one
    assert published == confirmed
    assert len(set(winners.values())) == 2, f"only one outcome was exercised: {winners}"


async def test_concurrent_identical_prepares_store_one_message(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    responses = await asyncio.gather(*(
        api.prepare(app, topic, message_id="once", payload={"x": 1}) for _ in range(50)))
    codes = Counter(r.status_code for r in responses)
    assert codes == {201: 1, 200: 49}, codes
    bodies = {r.text for r in responses}
    assert len(bodies) == 1
    items = await stored(api)
    assert [m["message_id"] for m in items] == ["once"]
    assert [e["event"] for e in await events(api, "once")] == ["prepared"]
