"""The bare baseline: the smallest server doing the same SQL and the same Kafka sends as the
RMS happy path over the same HTTP stack (FastAPI on uvicorn with uvloop + httptools), with no
validation, no auth, no RMS logic. Its throughput on this machine is the achievable ceiling;
the report prints RMS / bare.

Per request, on the real RMS schema (migrations):

* ``POST /v1/messages``: one statement inserting the message row and its ``prepared`` event;
* ``POST /v1/messages/{id}/confirm``: one guarded ``UPDATE ... WHERE state = 'pending-send'``
  with its ``confirmed`` event, then the Kafka send (awaited, one aiokafka producer per
  process, the RMS record format), then the ``published`` event insert;
* ``POST /v1/messages/{id}/cancel``: the guarded ``UPDATE`` to ``deleted`` with its event;
* an ack-topic consumer per process marks acknowledged messages ``done`` in one guarded
  ``UPDATE`` with its events per batch, then commits the offsets.

Run: ``python -m bench.baseline --port P --workers W`` with ``BARE_DSN``, ``BARE_KAFKA``,
``BARE_ACK_TOPIC`` and ``BARE_APP`` (an existing app) in the environment.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import traceback
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from fastapi import FastAPI, Request, Response

from bench.kafka_options import kafka_options
from bench.stack import BARE_ACK_TOPIC, Stack, wait_http
from rms.devstack.embedded import free_port

PREPARE = """
WITH changed AS (
  INSERT INTO messages (message_id, app, topic, key, payload, headers, check_url, state,
                        check_after_seconds, max_checks, ack_timeout_seconds, max_deliveries,
                        next_check_at)
  VALUES ($1, $2, $3, $4, $5::jsonb, '{}'::jsonb, $6, 'pending-send', 10, 15, 60, 6,
          now() + make_interval(secs => 10))
  ON CONFLICT (message_id) DO NOTHING RETURNING *),
history AS (INSERT INTO message_events (message_id, event, actor, detail)
            SELECT message_id, 'prepared', 'app:' || app, '{}'::jsonb FROM changed)
SELECT * FROM changed
"""
CONFIRM = """
WITH changed AS (
  UPDATE messages SET state = 'sent', confirmed_at = now(), next_check_at = NULL,
         delivery_count = delivery_count + 1, claim_token = NULL,
         next_delivery_at = now() + make_interval(secs => ack_timeout_seconds)
  WHERE message_id = $1 AND state = 'pending-send' RETURNING *),
history AS (INSERT INTO message_events (message_id, event, actor, detail)
            SELECT message_id, 'confirmed', 'app:' || app, '{"by": "producer"}'::jsonb
            FROM changed)
SELECT * FROM changed
"""
CANCEL = """
WITH changed AS (
  UPDATE messages SET state = 'deleted', deleted_at = now(), next_check_at = NULL
  WHERE message_id = $1 AND state = 'pending-send' RETURNING *),
history AS (INSERT INTO message_events (message_id, event, actor, detail)
            SELECT message_id, 'cancelled', 'app:' || app, '{"by": "producer"}'::jsonb
            FROM changed)
SELECT * FROM changed
"""
PUBLISHED = """INSERT INTO message_events (message_id, event, actor, detail)
               VALUES ($1, 'published', $2, $3::jsonb)"""
ACK = """
WITH changed AS (
  UPDATE messages SET state = 'done', done_at = now(), next_delivery_at = NULL
  WHERE message_id = ANY($1::text[]) AND state = 'sent' RETURNING *),
history AS (INSERT INTO message_events (message_id, event, actor, detail)
            SELECT message_id, 'acked', 'app:' || app, '{"via": "ack-topic"}'::jsonb
            FROM changed)
SELECT message_id FROM changed
"""
OK = Response(b'{"state":"ok"}', media_type="application/json")


def _record_headers(row: Any) -> list[tuple[str, bytes]]:
    return [("rms-message-id", row["message_id"].encode()), ("rms-app", row["app"].encode()),
            ("rms-delivery", str(row["delivery_count"]).encode()),
            ("rms-created-at", row["created_at"].isoformat().replace("+00:00", "Z").encode())]


async def _consume_acks(pool: asyncpg.Pool, bootstrap: str, topic: str,
                        ready: asyncio.Event) -> None:
    """Keep consuming; a failure is printed (to the bare server's log) and retried."""
    while True:
        try:
            await _consume_acks_once(pool, bootstrap, topic, ready)
        except Exception:
            traceback.print_exc()
            await asyncio.sleep(1.0)


async def _consume_acks_once(pool: asyncpg.Pool, bootstrap: str, topic: str,
                             ready: asyncio.Event) -> None:
    consumer = AIOKafkaConsumer(topic, **kafka_options(bootstrap), group_id="bench-bare-acks",
                                enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        while True:
            batches = await consumer.getmany(timeout_ms=500, max_records=1000)
            if consumer.assignment():
                ready.set()
            acks = [orjson.loads(r.value) for b in batches.values() for r in b]
            ids = [a["message_id"] for a in acks if "message_id" in a]
            if ids:
                await pool.fetch(ACK, ids)
                await consumer.commit()
    finally:
        await consumer.stop()


def create_app() -> FastAPI:
    dsn, bootstrap = os.environ["BARE_DSN"], os.environ["BARE_KAFKA"]
    app_name = os.environ["BARE_APP"]
    state: dict[str, Any] = {}
    acks_ready = asyncio.Event()

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        state["pool"] = await asyncpg.create_pool(dsn, min_size=4, max_size=20)
        state["producer"] = AIOKafkaProducer(**kafka_options(bootstrap), linger_ms=2,
                                             enable_idempotence=False, acks="all")
        await state["producer"].start()
        acks = asyncio.create_task(_consume_acks(state["pool"], bootstrap,
                                                 os.environ["BARE_ACK_TOPIC"], acks_ready))
        try:
            yield
        finally:
            acks.cancel()
            await asyncio.gather(acks, return_exceptions=True)
            await state["producer"].stop()
            await state["pool"].close()

    app = FastAPI(lifespan=lifespan)

    @app.get("/healthz")
    async def healthz() -> Response:
        """200 once the ack consumer has its partitions (so the first run is not slowed)."""
        return OK if acks_ready.is_set() else Response(status_code=503)

    @app.post("/v1/messages", status_code=201)
    async def prepare(request: Request) -> Response:
        body = orjson.loads(await request.body())
        await state["pool"].fetchrow(PREPARE, body["message_id"], app_name, body["topic"],
                                     body.get("key"), orjson.dumps(body["payload"]).decode(),
                                     body.get("check_url"))
        return Response(b'{"state":"pending-send"}', status_code=201,
                        media_type="application/json")

    @app.post("/v1/messages/{message_id}/confirm")
    async def confirm(message_id: str) -> Response:
        row = await state["pool"].fetchrow(CONFIRM, message_id)
        if row is not None:
            await state["producer"].send_and_wait(
                row["topic"], row["payload"].encode(), key=message_id.encode(),
                headers=_record_headers(row))
            await state["pool"].execute(PUBLISHED, message_id, f"app:{row['app']}",
                                        f'{{"delivery": {row["delivery_count"]}}}')
        return OK

    @app.post("/v1/messages/{message_id}/cancel")
    async def cancel(message_id: str) -> Response:
        await state["pool"].fetchrow(CANCEL, message_id)
        return OK

    return app


def __getattr__(name: str) -> FastAPI:
    """``bench.baseline:app`` for uvicorn's workers: built on first access."""
    if name == "app":
        return create_app()
    raise AttributeError(name)


def start(stack: Stack, workers: int) -> str:
    """Start the bare server beside the stack (same database, broker and app); its URL."""
    port = free_port()
    stack.spawn("bare", ["-m", "bench.baseline", "--port", str(port), "--workers", str(workers)],
                stack.env(BARE_DSN=stack.dsn, BARE_KAFKA=stack.bootstrap, BARE_APP=stack.app,
                          BARE_ACK_TOPIC=BARE_ACK_TOPIC), measured=True)
    url = f"http://127.0.0.1:{port}"
    wait_http(f"{url}/healthz", stack=stack)
    return url


def main(argv: list[str]) -> int:
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    uvicorn.run("bench.baseline:app", host="127.0.0.1", port=args.port, workers=args.workers,
                loop="uvloop", http="httptools", access_log=False, log_level="warning",
                lifespan="on")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
