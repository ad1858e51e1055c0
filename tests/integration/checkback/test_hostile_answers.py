"""Whatever a producer answers (any status line, headers, body: no JSON, huge numbers, a
content-length of thousands of digits), a check-back call ends in a counted outcome: the
HTTP client returns a reply or an HTTP error, the answer rule an outcome or ``Unanswered``,
and a call that raises anything else still counts as ``unknown`` in the worker, whose
retries stay bounded by ``max_checks``. Real sockets, a real worker and PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY

from confirm_service.caller import CheckBackCaller, Unanswered, parse_answer
from confirm_service.http11 import HttpError
from confirm_service.runtime import caller_settings
from rms.config import Settings
from rms.domain.checkback import Outcome
from rms.domain.models import App, Message
from rms.store.checkback import CheckBackStore
from rms.usecases.checkback import (
    CheckBackWorker,
    CheckResult,
    CheckSettings,
    MessageCheckBacks,
)
from rms.worker import worker_context
from rms_client.trace import TraceContext
from tests.integration.checkback.helpers import FAST, all_settled, drive, message
from tests.integration.checkback.test_http11 import Scripted, _call, serving
from tests.support import Api

_numbers = st.sampled_from([b"9" * 5000, b"-1", b"1e999", b"0x10", b"18446744073709551616"])
_heads = st.sampled_from([
    b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"f" * 300 + b"\r\n",
    b"HTTP/1.1 200 OK\r\nX: \x00\xff\r\nConnection: close\r\n\r\n",
    b"HTTP/1.1 999 Nine\r\nConnection: close\r\n\r\n",
    b"HTTP/1.1 200\r\nConnection: close\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nno colon here\r\nConnection: close\r\n\r\n",
    b"HTTP/9.9 200 OK\r\nConnection: close\r\n\r\n",
    b"\x16\x03\x01\x00\xa5\x01\x00\x00",
])
_bodies = st.one_of(st.binary(max_size=300), _numbers, st.builds(
    lambda n: b'{"status": ' + n + b"}", _numbers), st.sampled_from([
        b'{"status": "committed\\u0000"}', b'{"status": ["committed"]}', b"[" * 2000,
        b'{"status": {"status": "committed"}}', b"null", b'"committed"']))


@settings(max_examples=400, deadline=None)
@given(body=_bodies)
def test_the_answer_rule_gives_an_outcome_or_unanswered(body: bytes) -> None:
    with contextlib.suppress(Unanswered):
        assert isinstance(parse_answer(body), Outcome)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(head=st.one_of(_heads, st.binary(max_size=200)), body=_bodies)
async def test_any_answer_is_a_reply_or_an_http_error(head: bytes, body: bytes) -> None:
    script = Scripted(head + body, close=True)
    async with serving(script) as pool:
        try:
            reply = await _call(pool, script)
        except HttpError:
            return
    with contextlib.suppress(Unanswered):
        parse_answer(reply.body)


class _Unforeseen(CheckBackCaller):
    """The real caller, failing as no answer was foreseen to make it fail."""

    async def check(self, message: Message, app: App,
                    trace: TraceContext | None) -> CheckResult:
        raise RuntimeError("an answer no rule foresaw")


def _unknown() -> float:
    return REGISTRY.get_sample_value("rms_checks_total", {"outcome": "unknown"}) or 0.0


@pytest.mark.parametrize("max_checks", [2])
async def test_a_call_that_raises_is_a_counted_unknown_and_bounded(
        api: Api, settings: Settings, topic: str, unique: str, max_checks: int) -> None:
    producer = await api.create_app(f"raising-{unique}", prefixes=["http://127.0.0.1:9/"])
    message_id = await api.prepared_id(producer, topic, check_url="http://127.0.0.1:9/check",
                                       max_checks=max_checks, **FAST)
    local = settings.model_copy(update={"check_backoff_cap_seconds": 0.2})
    before = _unknown()
    async with worker_context(local, "confirm-worker") as context:
        caller = _Unforeseen(caller_settings(local))
        store = CheckBackStore(context.engine)
        worker = CheckBackWorker(
            CheckSettings.from_settings(local),
            (MessageCheckBacks(store, caller, context.dispatcher, context.worker_id),),
            store.apps, store.oldest_due_lag, context.worker_id)
        try:
            await drive(worker, lambda: all_settled(api, producer, [message_id]))
        finally:
            await caller.aclose()
        await asyncio.sleep(0)
    found = await message(api, producer, message_id)
    assert (found["state"], found["dead"], found["dead_reason"], found["check_count"]) == (
        "pending-send", True, "check-exhausted", max_checks)
    assert _unknown() >= before + max_checks
