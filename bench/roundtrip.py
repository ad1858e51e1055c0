"""Quick measurement: prepare + confirm round trips per second against a real ``rms serve``
(uvicorn, uvloop, httptools) on embedded PostgreSQL and tansu, one client and N concurrent.

    .venv/bin/python -m bench.roundtrip --transactions 3000 --concurrency 1 32
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from rms.embedded import EmbeddedKafka, EmbeddedPostgres, free_port
from rms.store.migrate import upgrade

ADMIN = "bench-admin-token"


async def _one(client: httpx.AsyncClient, auth: dict[str, str], topic: str) -> float:
    started = time.perf_counter()
    prepared = await client.post("/v1/messages", headers=auth, json={
        "topic": topic, "payload": {"order": 1, "total": 9.5}, "check_url": "http://127.0.0.1:1/c"})
    prepared.raise_for_status()
    confirmed = await client.post(f"/v1/messages/{prepared.json()['message_id']}/confirm",
                                  headers=auth)
    confirmed.raise_for_status()
    return time.perf_counter() - started


async def _run(url: str, auth: dict[str, str], total: int, concurrency: int) -> dict[str, float]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    latencies: list[float] = []
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as client:
        await _one(client, auth, "bench.warmup")
        remaining = total

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                latencies.append(await _one(client, auth, "bench.orders"))

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    return {"tps": len(latencies) / elapsed, "p50_ms": statistics.median(latencies) * 1000,
            "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transactions", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rms-bench-"))
    pg, kafka = EmbeddedPostgres(work / "pg"), EmbeddedKafka()
    pg.start()
    kafka.start()
    pg.create_database("rms")
    upgrade(pg.url("rms"))
    port = free_port()
    env = os.environ | {"RMS_DATABASE_URL": pg.url("rms"), "RMS_ADMIN_TOKEN": ADMIN,
                        "RMS_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
                        "RMS_ALLOW_PRIVATE_CALLBACKS": "true", "RMS_LOG_LEVEL": "WARNING"}
    server = subprocess.Popen([sys.executable, "-m", "rms.cli", "serve", "--port", str(port)],
                              env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                if httpx.get(f"{url}/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        created = httpx.post(f"{url}/v1/admin/apps", headers={"Authorization": f"Bearer {ADMIN}"},
                             json={"name": "bench", "produce_topics": ["bench.*"],
                                   "check_url_prefixes": ["http://127.0.0.1:1/"]})
        auth = {"Authorization": f"Bearer {created.json()['api_key']}"}
        print(f"conditions: {os.cpu_count()} cores, Python {platform.python_version()}, "
              f"PostgreSQL 18 (embedded, fsync on), tansu broker, 1 rms serve process, "
              f"client in the same machine; {args.transactions} transactions per row")
        print(f"{'clients':>8} {'tx/s':>10} {'p50 ms':>8} {'p99 ms':>8}")
        for concurrency in args.concurrency:
            figures = asyncio.run(_run(url, auth, args.transactions, concurrency))
            print(f"{concurrency:>8} {figures['tps']:>10.0f} {figures['p50_ms']:>8.1f} "
                  f"{figures['p99_ms']:>8.1f}")
    finally:
        server.terminate()
        server.wait(10)
        kafka.stop()
        pg.stop()


if __name__ == "__main__":
    main()
