"""Domain records to response bodies."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson
from fastapi.responses import Response

from message_service.schemas import AppCredentialsOut, AppOut, EventOut, EventsOut, MessageOut
from rms.domain.apps import Credentials
from rms.domain.listings import ListedTransaction
from rms.domain.models import App, Message, MessageEvent
from rms.domain.transactions import Transaction, TransactionView


def message_out(m: Message) -> MessageOut:
    return MessageOut(**message_fields(m))


def message_fields(m: Message) -> dict[str, Any]:
    """The message object of the contract (the fields of ``MessageOut``, in its order)."""
    return {
        "message_id": m.message_id, "app": m.app, "topic": m.topic, "key": m.key,
        "payload": m.payload, "headers": m.headers, "state": m.state.value, "dead": m.dead,
        "dead_reason": m.dead_reason.value if m.dead_reason else None,
        "check_count": m.check_count, "delivery_count": m.delivery_count,
        "check_url": m.check_url, "max_checks": m.max_checks,
        "max_deliveries": m.max_deliveries, "created_at": m.created_at,
        "confirmed_at": m.confirmed_at, "done_at": m.done_at, "deleted_at": m.deleted_at,
        "next_check_at": m.next_check_at, "next_delivery_at": m.next_delivery_at,
        "deliver_after": m.deliver_after,
        "traceparent": m.trace.traceparent if m.trace else None,
        "tracestate": m.trace.tracestate if m.trace else None,
        "ordered": m.ordered,
        "publish_failure": m.publish_failure,
        "subscribers": subscribers_fields(m),
        "acks": {name: {"at": ack.at, "via": ack.via} for name, ack in m.acks.items()} or None,
    }


def subscribers_fields(m: Message) -> list[dict[str, Any]] | None:
    """Each subscriber with its ack or its absence (None: the single-ack rule)."""
    if m.subscribers is None:
        return None
    return [{"app": name, "acked_at": ack.at if ack else None, "via": ack.via if ack else None,
             "exhausted": name in m.exhausted}
            for name in m.subscribers for ack in (m.acks.get(name),)]


def seen_by(m: Message, app: str) -> Message:
    """``m`` as ``app`` may see it: whole for its producer; for a consumer, without the other
    consumers (its own place among the subscribers, its own ack), since a consumer may not read
    the message (``GET`` answers it 404) and learns of it only what its delivery said."""
    if m.app == app:
        return m
    subscribers = None if m.subscribers is None else tuple(s for s in m.subscribers if s == app)
    return replace(m, subscribers=subscribers,
                   acks={name: ack for name, ack in m.acks.items() if name == app})


def ack_response(m: Message, outcome: str, app: str) -> Response:
    """The answer to ``app``'s ack: the message as it may see it, and in ``RMS-Ack`` what its
    ack did (``recorded``, or why it recorded nothing: :mod:`rms.domain.ack_outcomes`)."""
    response = message_response(seen_by(m, app))
    response.headers["rms-ack"] = outcome
    return response


def events_out(page: tuple[list[MessageEvent], str | None]) -> EventsOut:
    events, next_cursor = page
    return EventsOut(events=[event_out(e) for e in events], next_cursor=next_cursor)


def transaction_fields(view: TransactionView) -> dict[str, Any]:
    """The transaction object of the contract (the fields of ``TransactionOut``)."""
    return _shared_transaction_fields(view.transaction) | {
        "messages": [message_fields(m) for m in view.messages],
    }


def transaction_summary(listed: ListedTransaction) -> dict[str, Any]:
    """A row of the admin listing (the fields of ``TransactionSummary``)."""
    t = listed.transaction
    return _shared_transaction_fields(t) | {
        "message_ids": list(t.message_ids), "age_seconds": listed.age_seconds,
    }


def _shared_transaction_fields(t: Transaction) -> dict[str, Any]:
    """The fields of ``TransactionFields``, in its order."""
    return {
        "transaction_id": t.transaction_id, "app": t.app, "state": t.state.value,
        "dead": t.dead, "dead_reason": t.dead_reason.value if t.dead_reason else None,
        "check_count": t.check_count, "check_url": t.check_url, "max_checks": t.max_checks,
        "created_at": t.created_at, "confirmed_at": t.confirmed_at,
        "cancelled_at": t.cancelled_at, "next_check_at": t.next_check_at,
    }


def transaction_response(view: TransactionView, status_code: int = 200) -> Response:
    return json_response(transaction_fields(view), status_code)


def json_response(body: Any, status_code: int = 200) -> Response:
    """A JSON response written by orjson directly: the request path skips the response
    model's validation and serialisation (the route keeps ``response_model`` for the
    OpenAPI document; tests check both give the same bytes)."""
    return Response(orjson.dumps(body, option=orjson.OPT_UTC_Z), status_code=status_code,
                    media_type="application/json")


def message_response(m: Message, status_code: int = 200) -> Response:
    return json_response(message_fields(m), status_code)


def batch_response(found: list[Message], status_code: int = 200) -> Response:
    return json_response({"messages": [message_fields(m) for m in found]}, status_code)


def app_out(app: App) -> AppOut:
    return AppOut(
        name=app.name, produce_topics=list(app.produce_topics),
        consume_topics=list(app.consume_topics), check_url_prefixes=list(app.check_url_prefixes),
        default_check_url=app.default_check_url, created_at=app.created_at,
        key_rotated_at=app.key_rotated_at,
        previous_signing_secret_expires_at=(
            app.previous_signing_secret_expires_at if app.previous_signing_secret else None),
        ordered_topics=list(app.ordered_topics),
        max_deliveries=app.max_deliveries, ack_timeout_seconds=app.ack_timeout_seconds,
        last_ack_at=app.last_ack_at,
    )


def credentials_out(credentials: Credentials) -> AppCredentialsOut:
    return AppCredentialsOut(**app_out(credentials.app).model_dump(),
                             api_key=credentials.api_key,
                             signing_secret=credentials.signing_secret)


def event_out(event: MessageEvent) -> EventOut:
    return EventOut(at=event.at, event=event.event, actor=event.actor, detail=event.detail)
