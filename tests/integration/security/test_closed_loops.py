"""Overload protection never refuses a well-behaved load: against a real ``rms serve`` at its
default settings (overload protection on), closed loops of 64 clients (the default limit), each
waiting for its answer before its next transaction, on the happy path, transactions of three
messages, the fan-out path (three consumer apps on the topic), the ordered path and bulk
batches, are answered without a single 429 or 503. The refusals are counted, not timed."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.loadgen import Spec, drive
from rms.config import Settings
from tests.conftest import ADMIN_TOKEN
from tests.integration.security.served import create_app_keys, rms_serve

CLIENTS = 64
SECONDS = 3.0
PATHS = {  # path: (the load generator's kind, messages per transaction, keys)
    "happy": ("happy", 1, 0), "transaction": ("transaction", 3, 0),
    "fanout": ("happy", 1, 0), "ordered": ("happy", 1, 4), "bulk": ("bulk", 50, 0)}
CHECK_URL = "http://127.0.0.1:1/check"


@pytest.fixture
def serve(settings: Settings, tmp_path: Path) -> Iterator[int]:
    """``rms serve`` over the suite's PostgreSQL and Kafka, every other setting at its
    default."""
    with rms_serve(settings, tmp_path / "serve.log", {}) as port:
        yield port


def _loop(port: int, path: str, topic: str) -> dict[str, Any]:
    base_url = f"http://127.0.0.1:{port}"
    if path == "fanout":
        for n in range(3):
            create_app_keys(base_url, ADMIN_TOKEN, f"fanout{n}-{uuid.uuid4().hex[:8]}",
                            produce_topics=[], consume_topics=[topic])
    keys = create_app_keys(base_url, ADMIN_TOKEN, f"{path}-{uuid.uuid4().hex[:8]}")
    kind, batch, ordered_keys = PATHS[path]
    spec = Spec(base_url=base_url, token=keys["api_key"], kind=kind, mode="closed",
                id_prefix=f"{path}-{uuid.uuid4().hex[:8]}", topic=topic, check_url=CHECK_URL,
                concurrency=CLIENTS, duration=SECONDS, cancel_every=0, batch_size=batch,
                keys=ordered_keys)
    return asyncio.run(drive(spec))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("path", list(PATHS))
def test_a_closed_loop_at_the_defaults_is_never_refused(serve: int, path: str) -> None:
    result = _loop(serve, path, f"closed.{path}.{uuid.uuid4().hex[:8]}")
    finished = [t for t in result["transactions"] if t[1] != "refused"]
    assert result["errors"] == 0, result["error_samples"]
    assert result["refusals"] == 0, (path, result["refusals"], len(finished))
    assert finished, "no transaction finished"
