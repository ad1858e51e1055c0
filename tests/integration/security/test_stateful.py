"""The state machine of design section 3 against a model: hypothesis drives random sequences of
prepare / send / confirm / cancel / ack, batch confirm / cancel and the admin confirm / cancel /
resend through the HTTP API of a real server, and checks every status code, every returned
state and, after each step, every stored state against the model."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

import httpx
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from rms.config import Settings
from tests.conftest import ADMIN_TOKEN
from tests.integration.security.served import create_app_keys, served

PENDING, SENT, DONE, DELETED = "pending-send", "sent", "done", "deleted"
# (action, state before) -> state after; a pair not listed is a 409 naming the current state
LEGAL = {
    ("confirm", PENDING): SENT, ("confirm", SENT): SENT, ("confirm", DONE): DONE,
    ("cancel", PENDING): DELETED, ("cancel", DELETED): DELETED,
    ("ack", SENT): DONE, ("ack", DONE): DONE,
    ("resend", SENT): SENT,
}


class MessageLifecycle(RuleBasedStateMachine):
    base_url: ClassVar[str] = ""
    topic: ClassVar[str] = ""
    ids = Bundle("ids")

    def __init__(self) -> None:
        super().__init__()
        self.http = httpx.Client(base_url=self.base_url, timeout=30.0)
        self.model: dict[str, str] = {}
        self.app = ""
        self.headers: dict[str, str] = {}
        self.intruder: dict[str, str] = {}

    # ---- helpers -------------------------------------------------------------------------

    @property
    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {ADMIN_TOKEN}"}

    def _body(self, message_id: str, payload: Any = None) -> dict[str, Any]:
        return {"message_id": message_id, "topic": self.topic,
                "payload": {"id": message_id} if payload is None else payload,
                "check_url": "http://127.0.0.1:1/check"}

    def _expect(self, response: httpx.Response, message_id: str, action: str) -> None:
        before = self.model[message_id]
        after = LEGAL.get((action, before))
        if after is None:
            assert response.status_code == 409, (action, before, response.text)
            assert response.json()["current_state"] == before
            return
        assert response.status_code == 200, (action, before, response.text)
        assert response.json()["state"] == after
        self.model[message_id] = after

    # ---- rules ---------------------------------------------------------------------------

    @initialize()
    def register(self) -> None:
        self.app = f"sm-{uuid.uuid4().hex[:12]}"
        self.headers = {"Authorization": "Bearer " + create_app_keys(
            self.base_url, ADMIN_TOKEN, self.app)["api_key"]}
        self.intruder = {"Authorization": "Bearer " + create_app_keys(
            self.base_url, ADMIN_TOKEN, f"{self.app}-x", consume_topics=["elsewhere"])["api_key"]}

    @rule(target=ids, one_shot=st.booleans())
    def prepare(self, one_shot: bool) -> str:
        message_id = f"{self.app}-{uuid.uuid4().hex[:8]}"
        path = "/v1/messages/send" if one_shot else "/v1/messages"
        response = self.http.post(path, json=self._body(message_id), headers=self.headers)
        assert response.status_code == 201, response.text
        state = SENT if one_shot else PENDING
        assert response.json()["state"] == state
        self.model[message_id] = state
        return message_id

    @rule(message_id=ids)
    def prepare_again(self, message_id: str) -> None:
        """A producer retry: same id, same content -> 200 with the stored message."""
        response = self.http.post("/v1/messages", json=self._body(message_id),
                                  headers=self.headers)
        assert response.status_code == 200, response.text
        assert response.json()["state"] == self.model[message_id]

    @rule(message_id=ids)
    def prepare_other_content(self, message_id: str) -> None:
        response = self.http.post("/v1/messages", json=self._body(message_id, payload=0),
                                  headers=self.headers)
        assert response.status_code == 409, response.text

    @rule(message_id=ids, action=st.sampled_from(["confirm", "cancel", "ack"]))
    def producer_action(self, message_id: str, action: str) -> None:
        response = self.http.post(f"/v1/messages/{message_id}/{action}", headers=self.headers)
        self._expect(response, message_id, action)

    @rule(message_id=ids, action=st.sampled_from(["confirm", "cancel", "resend"]))
    def admin_action(self, message_id: str, action: str) -> None:
        response = self.http.post(f"/v1/admin/messages/{message_id}/{action}",
                                  headers=self.admin)
        self._expect(response, message_id, action)

    @rule(chosen=st.lists(ids, min_size=1, max_size=4, unique=True),
          action=st.sampled_from(["confirm", "cancel"]))
    def batch(self, chosen: list[str], action: str) -> None:
        """All or nothing: one illegal item is a 409 and nothing changes."""
        response = self.http.post(f"/v1/messages/batch/{action}",
                                  json={"message_ids": chosen}, headers=self.headers)
        outcome = {m: LEGAL.get((action, self.model[m])) for m in chosen}
        if None in outcome.values():
            assert response.status_code == 409, response.text
            return
        assert response.status_code == 200, response.text
        assert [m["state"] for m in response.json()["messages"]] == [outcome[m] for m in chosen]
        self.model.update({m: state for m, state in outcome.items() if state is not None})

    @rule(message_id=ids, action=st.sampled_from(["confirm", "cancel", "ack", ""]))
    def intruder_sees_nothing(self, message_id: str, action: str) -> None:
        path = f"/v1/messages/{message_id}" + (f"/{action}" if action else "")
        response = self.http.request("POST" if action else "GET", path, headers=self.intruder)
        assert response.status_code == 404, response.text

    @rule(message_id=consumes(ids))
    def forget(self, message_id: str) -> None:
        """Drop an id from the bundle (it stays in the model) so later steps meet the same
        few messages often."""
        assert message_id in self.model

    # ---- invariant -----------------------------------------------------------------------

    @invariant()
    def stored_states_match_the_model(self) -> None:
        if not self.app:
            return
        response = self.http.get("/v1/admin/messages", headers=self.admin,
                                 params={"app": self.app, "limit": 1000})
        assert response.status_code == 200, response.text
        stored = {m["message_id"]: m["state"] for m in response.json()["items"]}
        assert stored == self.model

    def teardown(self) -> None:
        # every example registers an app consuming every topic: unsubscribed at its end, so
        # the next example's messages have its own app as their one subscriber
        if hasattr(self, "app"):
            response = self.http.put(f"/v1/admin/apps/{self.app}/consume-topics",
                                     json={"consume_topics": []}, headers=self.admin)
            assert response.status_code == 200, response.text
        self.http.close()


@pytest.fixture
def base_url(settings: Settings) -> Iterator[str]:
    with served(settings.model_copy(update={"ack_consumer_enabled": False})) as url:
        yield url


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_state_machine_matches_the_model(base_url: str, topic: str) -> None:
    MessageLifecycle.base_url = base_url
    MessageLifecycle.topic = topic
    run_state_machine_as_test(MessageLifecycle, settings=settings(
        max_examples=12, stateful_step_count=25, deadline=None, database=None,
        derandomize=True, suppress_health_check=list(HealthCheck),
        # no shrinking: over real HTTP it takes minutes; the failing steps are printed as found
        phases=[Phase.explicit, Phase.generate]))
