"""The demo order service: a producer built on the RMS SDK.

``POST /orders`` stores an order in the service's **own** database and publishes "order paid"
(topic ``orders.paid``) through :meth:`RmsProducer.transaction`: prepare, local transaction
(whose first statement is the barrier row), confirm. ``POST /rms/check`` is the check-back
endpoint (signature verified, replays refused), answered by the barrier, so RMS always learns
``committed`` or ``rolled_back``. The points demo consumes the records.

Try the failure paths with ``"simulate"``: ``"fail"`` (the local transaction raises: the
message is cancelled) and ``"crash"`` (the order commits but the service "dies" before
confirming: the confirm service asks ``/rms/check`` and confirms it).

``DEMO_CHECK_AFTER_SECONDS`` overrides RMS's first check-back delay for this service's
messages (handy to watch the "crash" path). Without ``DEMO_SIGNING_SECRET`` the service runs
but refuses every check-back (503).

Run (``rms dev`` does this for you)::

    DEMO_API_KEY=<orders app key> DEMO_SIGNING_SECRET=<orders app signing secret> \\
    DEMO_DATABASE_URL=postgresql://.../demo_orders DEMO_RMS_URL=http://127.0.0.1:8000 \\
    python -m rms.devstack.demo.orders --port 8001
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

import structlog
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, Field
from sqlalchemy import Column, DateTime, MetaData, Numeric, Table, Text, func, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from rms_client.barrier import Barrier, barrier_table
from rms_client.checkback import DEFAULT_PATH
from rms_client.checkback_fastapi import checkback_router
from rms_client.producer import MessageInfo, RmsError, RmsProducer

log = structlog.get_logger(__name__)
metadata = MetaData()
orders = Table(
    "orders", metadata,
    Column("order_id", Text, primary_key=True),
    Column("customer", Text, nullable=False),
    Column("total", Numeric(12, 2), nullable=False),
    Column("message_id", Text, nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
barrier_rows = barrier_table(metadata)


class PaymentDeclined(Exception):
    """The simulated failure of the local transaction."""


@dataclass(frozen=True)
class Config:
    rms_url: str
    api_key: str
    database_url: str
    signing_secrets: tuple[str, ...]
    public_url: str
    topic: str = "orders.paid"
    check_after_seconds: float | None = None

    @property
    def check_url(self) -> str:
        return self.public_url.rstrip("/") + DEFAULT_PATH

    @classmethod
    def from_env(cls, args: argparse.Namespace) -> Config:
        env = os.environ
        secrets = tuple(args.signing_secret or env.get("DEMO_SIGNING_SECRET", "").split())
        values = {"DEMO_API_KEY": args.api_key or env.get("DEMO_API_KEY"),
                  "DEMO_DATABASE_URL": args.database_url or env.get("DEMO_DATABASE_URL")}
        missing = [name for name, value in values.items() if not value]
        if missing:
            raise SystemExit(f"rms.devstack.demo.orders: set {', '.join(missing)} (or the options)")
        return cls(
            rms_url=args.rms_url or env.get("DEMO_RMS_URL") or env.get("RMS_URL")
            or "http://127.0.0.1:8000",
            api_key=str(values["DEMO_API_KEY"]),
            database_url=_asyncpg(str(values["DEMO_DATABASE_URL"])),
            signing_secrets=secrets,
            public_url=args.public_url or env.get("DEMO_PUBLIC_URL")
            or f"http://127.0.0.1:{args.port}",
            topic=env.get("DEMO_TOPIC", "orders.paid"),
            check_after_seconds=float(env["DEMO_CHECK_AFTER_SECONDS"])
            if env.get("DEMO_CHECK_AFTER_SECONDS") else None,
        )


class OrderIn(BaseModel):
    customer: str = Field(min_length=1, max_length=100)
    total: float = Field(gt=0, le=1_000_000)
    simulate: Literal["none", "fail", "crash"] = "none"


class OrderOut(BaseModel):
    order_id: str
    message_id: str
    message_state: str


@dataclass
class OrderService:
    config: Config
    engine: AsyncEngine
    producer: RmsProducer
    barrier: Barrier

    async def place(self, order: OrderIn) -> OrderOut:
        """The reliable-message flow: prepare, local transaction, confirm (or cancel)."""
        order_id = uuid.uuid4().hex[:12]
        message_id = f"order-{order_id}-paid"
        payload = {"order_id": order_id, "customer": order.customer, "total": order.total}
        options: dict[str, Any] = {"message_id": message_id, "key": order.customer,
                                   "check_url": self.config.check_url,
                                   "check_after_seconds": self.config.check_after_seconds}
        if order.simulate == "crash":  # prepare + commit, then "die" before the confirm
            message = await self.producer.prepare(self.config.topic, payload, **options)
            await self._store(order_id, message_id, order)
            return OrderOut(order_id=order_id, message_id=message_id,
                            message_state=message.state)
        async with self.producer.transaction(self.config.topic, payload, **options):
            await self._store(order_id, message_id, order, fail=order.simulate == "fail")
        confirmed = await self.producer.get(message_id)
        return OrderOut(order_id=order_id, message_id=message_id,
                        message_state=confirmed.state)

    async def _store(self, order_id: str, message_id: str, order: OrderIn,
                     fail: bool = False) -> None:
        async with self.engine.begin() as conn:
            await self.barrier.mark_committed(conn, message_id)
            await conn.execute(insert(orders).values(
                order_id=order_id, customer=order.customer, total=order.total,
                message_id=message_id))
            if fail:
                raise PaymentDeclined(f"payment for order {order_id} declined (simulated)")

    async def get(self, order_id: str) -> dict[str, Any] | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(orders).where(orders.c.order_id == order_id))).first()
        if row is None:
            return None
        message: MessageInfo = await self.producer.get(row.message_id)
        return {"order_id": row.order_id, "customer": row.customer, "total": float(row.total),
                "message_id": row.message_id, "message_state": message.state}


def create_app(config: Config, *, producer: RmsProducer | None = None,
               engine: AsyncEngine | None = None) -> FastAPI:
    """The order service. ``producer`` and ``engine`` may be given (tests); otherwise they are
    built from ``config`` and closed on shutdown."""
    db = engine or create_async_engine(config.database_url, pool_size=5)
    rms = producer or RmsProducer(config.rms_url, config.api_key)
    service = OrderService(config, db, rms, Barrier(db, table=barrier_rows))

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with db.begin() as conn:
            await conn.run_sync(metadata.create_all)
        try:
            yield
        finally:
            if producer is None:
                await rms.aclose()
            if engine is None:
                await db.dispose()

    app = FastAPI(title="RMS demo: order service", lifespan=lifespan)
    if config.signing_secrets:
        app.include_router(checkback_router(
            service.barrier.resolve, secrets=config.signing_secrets,
            resolve_transaction=service.barrier.resolve_transaction))
    else:
        _refuse_check_backs(app)
    _add_order_routes(app, service)
    return app


def _add_order_routes(app: FastAPI, service: OrderService) -> None:
    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        """The process is up."""
        return {"status": "ok"}

    @app.post("/orders", status_code=201, response_model=OrderOut)
    async def place_order(order: OrderIn) -> OrderOut:
        """Create an order and publish "order paid" reliably."""
        try:
            return await service.place(order)
        except PaymentDeclined as exc:
            raise HTTPException(402, f"{exc}; the message was cancelled") from exc
        except RmsError as exc:
            raise HTTPException(503, f"RMS refused or is unreachable: {exc}") from exc

    @app.get("/orders/{order_id}")
    async def get_order(order_id: str) -> dict[str, Any]:
        """An order and the state of its "order paid" message in RMS."""
        found = await service.get(order_id)
        if found is None:
            raise HTTPException(404, f"no order {order_id!r}")
        return found


def _refuse_check_backs(app: FastAPI) -> None:
    """Without the app's signing secret no call can be verified: refuse them all (RMS counts
    that as unknown) rather than trust unsigned calls, and say so loudly."""
    log.error("demo_orders.no_signing_secret",
              hint="set DEMO_SIGNING_SECRET to the orders app's signing secret")

    @app.post(DEFAULT_PATH, status_code=503)
    async def rms_check_back() -> dict[str, str]:
        """Refused: this service was started without a signing secret."""
        raise HTTPException(503, "DEMO_SIGNING_SECRET is not set; cannot verify check-backs")


def _asyncpg(url: str) -> str:
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix):]
    return url


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m rms.devstack.demo.orders", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("DEMO_PORT", "8001")))
    parser.add_argument("--rms-url", help="RMS API (env DEMO_RMS_URL, RMS_URL)")
    parser.add_argument("--api-key", help="the orders app's API key (env DEMO_API_KEY)")
    parser.add_argument("--database-url", help="this service's own PostgreSQL database "
                                               "(env DEMO_DATABASE_URL)")
    parser.add_argument("--signing-secret", action="append",
                        help="the orders app's signing secret; twice during a rotation "
                             "(env DEMO_SIGNING_SECRET, space-separated)")
    parser.add_argument("--public-url", help="how RMS reaches this service (env "
                                             "DEMO_PUBLIC_URL; default http://127.0.0.1:PORT)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    from rms.logging import configure as configure_logging

    args = parse_args(argv)
    config = Config.from_env(args)
    configure_logging(os.environ.get("RMS_LOG_LEVEL", "INFO"),
                      os.environ.get("RMS_LOG_JSON", "true").lower() == "true")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    uvicorn.run(create_app(config), host=args.host, port=args.port, access_log=False,
                log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
