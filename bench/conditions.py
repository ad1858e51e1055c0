"""The conditions printed next to the figures: machine, versions, PostgreSQL settings, broker,
git commit."""

from __future__ import annotations

import asyncio
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import asyncpg
import psutil

PACKAGES = ("fastapi", "uvicorn", "uvloop", "httptools", "sqlalchemy", "asyncpg", "aiokafka",
            "pydantic", "orjson")
PG_SETTINGS = ("server_version", "fsync", "synchronous_commit", "shared_buffers", "wal_level",
               "max_connections")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


async def _postgres(dsn: str) -> dict[str, str]:
    conn = await asyncpg.connect(dsn)
    try:
        return {name: str(await conn.fetchval(f"SHOW {name}")) for name in PG_SETTINGS}
    finally:
        await conn.close()


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False,
                              cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return done.stdout.strip() or "unknown"


def _broker(own: bool, bootstrap: str) -> str:
    if not own:
        return f"external at {bootstrap}"
    from rms.devstack.kafka_broker import kafka_version

    return f"Apache Kafka {kafka_version()} (KRaft, one node, 1 GiB heap) at {bootstrap}"


def collect(dsn: str, bootstrap: str, own: bool, api_workers: int) -> dict[str, Any]:
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"])
    return {
        "cores": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in PACKAGES},
        "postgresql": asyncio.run(_postgres(dsn)) | {"embedded": str(own)},
        "broker": _broker(own, bootstrap),
        "git_commit": _run(["git", "rev-parse", "--short", "HEAD"])
                      + ("" if dirty in ("", "unknown") else " (dirty)"),
        "rms_serve_workers": api_workers,
        "stack": "own (all on this machine)" if own else "external target",
    }
