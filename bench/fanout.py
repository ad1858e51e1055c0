"""The fan-out path: the happy path's transactions on a topic that three consumer apps read,
so each message has three subscribers and is ``done`` only at the third ack (design section 3).

Every record's ``rms-awaiting`` names the apps still owing. One consumer process reads the
topic once and, for each record, acks as every app the record names: one record on the ack
topic per app, signed with that app's own secret. RMS receives what three consumer services
would send it; the bench machine does not read the topic three times. The row carries
``acks`` (one per subscriber of each confirmed message that reached ``done``), so the CPU of
``rms serve`` and of PostgreSQL per ack is printed beside the throughput.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from bench.paths import Load, run_load_recorded
from bench.stack import TOPICS, Stack, StackError, create_app, create_topics

CONSUMER_APPS = 3
GROUP = "fanout-consumer"
READY_SECONDS = 60.0


def register_consumers(stack: Stack, count: int) -> list[tuple[str, str]]:
    """The path's consumer apps, each consuming only its topic: (name, signing secret)."""
    tag = uuid.uuid4().hex[:8]
    apps = []
    for n in range(1, count + 1):
        name = f"bench-fanout{n}-{tag}"
        app = create_app(stack, {"name": name, "consume_topics": [TOPICS["fanout"]]})
        apps.append((name, str(app["signing_secret"])))
    return apps


def start_consumer(stack: Stack, apps: list[tuple[str, str]], run_id: str) -> Path:
    """The consumer acking as every app, ready with its partition; returns its receipts."""
    asyncio.run(create_topics(stack.bootstrap, [TOPICS["fanout"]]))
    receipts, ready = stack.work / f"{run_id}.receipts.tsv", stack.work / f"{run_id}.ready"
    names = [arg for name, _ in apps for arg in ("--consumer-app", name)]
    stack.spawn(f"{GROUP}-{run_id}", [
        "-m", "bench.consumer", "--bootstrap", stack.bootstrap, "--topics", TOPICS["fanout"],
        "--ack-topic", stack.ack_topic, *names, "--out", str(receipts), "--ready", str(ready)],
        env=stack.env(BENCH_SIGNING_SECRET=",".join(secret for _, secret in apps)),
        group=GROUP)
    deadline = time.monotonic() + READY_SECONDS
    while not ready.exists():
        stack.check_alive()
        if time.monotonic() > deadline:
            raise StackError(f"the fan-out consumer did not get its partition in "
                             f"{READY_SECONDS:.0f}s")
        time.sleep(0.05)
    return receipts


def run_fanout(stack: Stack, load: Load, run_id: str) -> dict[str, Any]:
    """One fan-out run (``load.path`` is ``fanout``, ``load.consumers`` its consumer apps): the
    happy path's row, verified to hold one ack per app of each message, plus the acks."""
    apps = register_consumers(stack, load.consumers)
    receipts = start_consumer(stack, apps, run_id)
    try:
        row, _ = run_load_recorded(stack, load, stack.api_url, run_id, receipts)
    finally:
        stack.stop_process(f"{GROUP}-{run_id}", GROUP)
        release_consumers(stack, apps)
    done = row["stages"].get("done", {}).get("count", 0)
    return row | {"acks": done * len(apps)}


def release_consumers(stack: Stack, apps: list[tuple[str, str]]) -> None:
    """Delete the run's consumer apps: they would otherwise be subscribers of the next run's
    messages too, with no consumer left to ack as them."""
    for name, _ in apps:
        response = httpx.delete(f"{stack.api_url}/v1/admin/apps/{name}", timeout=30,
                                headers={"Authorization": f"Bearer {stack.admin_token}"})
        if response.status_code not in (200, 204):
            raise StackError(f"cannot delete the fan-out app {name}: "
                             f"{response.status_code} {response.text}")
