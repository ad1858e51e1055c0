"""The demo points service: a consumer built on :mod:`rms_client.consumer`.

It consumes "order paid" records (topic ``orders.paid`` by default), adds points to the
customer's balance in its **own** database, in the same transaction as the SDK's inbox row (so
a redelivered record never adds points twice), then acks to RMS. ``GET /points/{customer}``
shows a balance; ``GET /points`` all of them; ``GET /points/ledger/{message_id}`` what one
message added.

Run (``rms dev`` does this for you)::

    DEMO_API_KEY=<points app key> DEMO_DATABASE_URL=postgresql://.../demo_points \\
    RMS_KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 DEMO_RMS_URL=http://127.0.0.1:8000 \\
    python -m rms.devstack.demo.points --port 8002

Points for a record: ``payload["points"]`` if given, else the whole part of ``payload["total"]``
(or ``"amount"``), else 1; the customer is ``payload["customer"]`` (or ``"customer_id"``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import structlog
from aiokafka.errors import KafkaError
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from rms_client.consumer import RmsConsumer, RmsRecord, ensure_inbox, make_acker

log = structlog.get_logger(__name__)

SCHEMA = [
    "CREATE TABLE IF NOT EXISTS points (customer text PRIMARY KEY, points bigint NOT NULL, "
    "updated_at timestamptz NOT NULL DEFAULT now())",
    "CREATE TABLE IF NOT EXISTS points_ledger (message_id text PRIMARY KEY, customer text NOT "
    "NULL, points bigint NOT NULL, delivery int NOT NULL, at timestamptz NOT NULL DEFAULT now())",
]


@dataclass(frozen=True)
class Config:
    rms_url: str
    api_key: str
    database_url: str
    bootstrap_servers: str
    topic: str
    group_id: str
    ack_mode: str
    consumer_app: str
    signing_secret: str | None  # the consumer app's, to sign ack records (topic acks)
    ack_topic: str
    port: int

    @classmethod
    def from_env(cls, args: argparse.Namespace) -> Config:
        env = os.environ
        missing = [name for name in ("DEMO_API_KEY", "DEMO_DATABASE_URL") if not env.get(name)]
        if missing:
            raise SystemExit(f"rms.devstack.demo.points: set {', '.join(missing)}")
        return cls(
            rms_url=env.get("DEMO_RMS_URL") or env.get("RMS_URL") or "http://127.0.0.1:8000",
            api_key=env["DEMO_API_KEY"],
            database_url=_asyncpg(env["DEMO_DATABASE_URL"]),
            bootstrap_servers=env.get("RMS_KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
            topic=args.topic or env.get("DEMO_TOPIC", "orders.paid"),
            # the app's own consumer group (design section 6), unless told another
            group_id=env.get("DEMO_GROUP") or env.get("DEMO_CONSUMER_APP", "points"),
            ack_mode=env.get("DEMO_ACK_MODE", "http"),
            consumer_app=env.get("DEMO_CONSUMER_APP", "points"),
            signing_secret=env.get("DEMO_SIGNING_SECRET"),
            ack_topic=env.get("RMS_ACK_TOPIC", "rms.acks"),
            port=args.port or int(env.get("DEMO_PORT", "8002")),
        )


def points_for(payload: Any) -> tuple[str, int]:
    """``(customer, points)`` for an order-paid payload (see the module docstring)."""
    body = payload if isinstance(payload, dict) else {}
    customer = str(body.get("customer") or body.get("customer_id") or "guest")
    for name in ("points", "total", "amount"):
        value = body.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return customer, max(0, int(value))
    return customer, 1


async def add_points(conn: AsyncConnection, message: RmsRecord) -> None:
    """The handler: runs in the inbox's transaction, so it happens once per message."""
    customer, points = points_for(message.payload)
    await conn.execute(text(
        "INSERT INTO points (customer, points) VALUES (:customer, :points) "
        "ON CONFLICT (customer) DO UPDATE SET points = points.points + excluded.points, "
        "updated_at = now()"), {"customer": customer, "points": points})
    await conn.execute(text(
        "INSERT INTO points_ledger (message_id, customer, points, delivery) "
        "VALUES (:id, :customer, :points, :delivery)"),
        {"id": message.message_id, "customer": customer, "points": points,
         "delivery": message.delivery})
    log.info("points.added", message_id=message.message_id, topic=message.topic,
             customer=customer, points=points, attempt=message.delivery)


async def prepare_database(engine: AsyncEngine) -> None:
    await ensure_inbox(engine)
    async with engine.begin() as conn:
        for statement in SCHEMA:
            await conn.execute(text(statement))


def build_consumer(config: Config, engine: AsyncEngine) -> RmsConsumer:
    acker = make_acker(config.ack_mode, rms_url=config.rms_url, api_key=config.api_key,
                       bootstrap_servers=config.bootstrap_servers,
                       consumer_app=config.consumer_app,
                       signing_secret=config.signing_secret, ack_topic=config.ack_topic)
    return RmsConsumer(app=config.consumer_app, engine=engine, handler=add_points, acker=acker,
                       bootstrap_servers=config.bootstrap_servers, group_id=config.group_id,
                       topics=[config.topic], client_id="demo-points",
                       kafka_options={"metadata_max_age_ms": 5000})


async def consume_forever(config: Config, engine: AsyncEngine) -> None:
    """Restart the consumer after a broker problem; a redelivery is harmless by design."""
    while True:
        consumer = build_consumer(config, engine)
        try:
            await consumer.start()
            log.info("points.consuming", topic=config.topic, group=config.group_id,
                     ack_mode=config.ack_mode)
            await consumer.run()
        except (KafkaError, OSError) as exc:
            log.warning("points.consumer_error", error=str(exc))
        finally:
            await consumer.stop()
        await asyncio.sleep(1.0)


def create_app(config: Config) -> FastAPI:
    engine = create_async_engine(config.database_url, pool_size=5)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await prepare_database(engine)
        task = asyncio.create_task(consume_forever(config, engine), name="points-consumer")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await engine.dispose()

    app = FastAPI(title="RMS demo: points service", lifespan=lifespan)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        """The process is up."""
        return {"status": "ok"}

    @app.get("/points")
    async def balances() -> dict[str, int]:
        """Every customer's balance."""
        async with engine.connect() as conn:
            rows = await conn.execute(text("SELECT customer, points FROM points ORDER BY 1"))
            return {row.customer: row.points for row in rows}

    @app.get("/points/{customer}")
    async def balance(customer: str) -> dict[str, Any]:
        """One customer's balance (0 when nothing was added yet)."""
        async with engine.connect() as conn:
            points = (await conn.execute(text("SELECT points FROM points WHERE customer = :c"),
                                         {"c": customer})).scalar()
        return {"customer": customer, "points": points or 0}

    @app.get("/points/ledger/{message_id}")
    async def ledger(message_id: str) -> dict[str, Any]:
        """What one message added (proof that a redelivery added nothing)."""
        async with engine.connect() as conn:
            row = (await conn.execute(text(
                "SELECT customer, points, delivery FROM points_ledger WHERE message_id = :id"),
                {"id": message_id})).first()
        if row is None:
            return {"message_id": message_id, "processed": False}
        return {"message_id": message_id, "processed": True, "customer": row.customer,
                "points": row.points, "delivery": row.delivery}

    return app


def _asyncpg(url: str) -> str:
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix):]
    return url


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    from rms.logging import configure as configure_logging

    parser = argparse.ArgumentParser(prog="python -m rms.devstack.demo.points", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="HTTP port (env DEMO_PORT, 8002)")
    parser.add_argument("--topic", default=None, help="topic (env DEMO_TOPIC, orders.paid)")
    config = Config.from_env(parser.parse_args(argv))
    configure_logging(os.environ.get("RMS_LOG_LEVEL", "INFO"),
                      os.environ.get("RMS_LOG_JSON", "true").lower() == "true")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per ack is noise
    uvicorn.run(create_app(config), host="127.0.0.1", port=config.port, access_log=False,
                log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
