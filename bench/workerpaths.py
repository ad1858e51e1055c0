"""The worker paths: check-back (``rms confirm-worker`` against the local callback server that
answers ``committed``) and redelivery (``rms recovery-worker``; the consumer does not
acknowledge delivery 1).

Method (folded from the former ``checkback_bench.py`` / ``redelivery_bench.py``):

1. seed ``messages`` messages over HTTP with the batch endpoints, none due yet (check-back:
   prepared with ``check_after_seconds`` of a day; redelivery: prepared and confirmed with an
   ``ack_timeout_seconds`` of a week, delivery 1 received by the consumer and not acked);
2. refresh the planner's statistics of the messages and their events (``ANALYZE``): the
   seeding changed most of the table within seconds, and autovacuum would analyze it only up to
   a minute later, so the run would otherwise be planned for the table as it was before the
   seeding (a join that expects one row and meets 20,000) rather than as autovacuum keeps a
   running system's statistics;
3. start the worker process(es) and wait until each logs ``worker.started``;
4. the gate: one ``UPDATE`` (the bench's only write) makes all of them due at the database's
   ``now()`` = time zero;
5. the rate is the messages resolved divided by the time from the gate to the last resolution on the
   database clock: the last ``confirmed_at`` (check-back; it includes the signed call, the
   guarded confirm and the publish) or the last ``published`` event of delivery 2
   (redelivery). Then wait until all are ``done`` (the consumer acks) and verify. Messages
   not resolved within ``timeout`` are counted as errors (a slow system is not a broken
   contract); every resolved one must reach ``done``.

Stages: ``resolve`` = confirmed_at (or the delivery-2 ``published`` event) minus the gate;
``record`` = the consumer's receipt of that delivery minus it; ``done`` = done_at minus the
receipt.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx

from bench import history
from bench.paths import usage_dict
from bench.stack import TOPICS, Stack, receipts_file
from bench.stats import rate, summarize
from bench.verify import CONFIRMED, verify

SEED_BATCH = 1000
SEED_ATTEMPTS = 30
GATES = {
    "checkback": "UPDATE messages SET next_check_at = now() "
                 "WHERE message_id = ANY($1::text[]) AND state = 'pending-send'",
    "redelivery": "UPDATE messages SET next_delivery_at = now() "
                  "WHERE message_id = ANY($1::text[]) AND state = 'sent'",
    # every scheduled message's time comes at once: its deliver_after is the gate
    "delayed": "UPDATE messages SET deliver_after = now(), next_delivery_at = now() "
               "WHERE message_id = ANY($1::text[]) AND state = 'sent'",
}
RESOLVED = {
    "checkback": "SELECT message_id, extract(epoch FROM confirmed_at)::float8 FROM messages "
                 "WHERE message_id = ANY($1::text[]) AND confirmed_at IS NOT NULL",
    "redelivery": "SELECT message_id, extract(epoch FROM max(at))::float8 FROM message_events "
                  "WHERE message_id = ANY($1::text[]) AND event = 'published' "
                  "AND detail->>'delivery' = '2' GROUP BY message_id",
    "delayed": "SELECT message_id, extract(epoch FROM max(at))::float8 FROM message_events "
               "WHERE message_id = ANY($1::text[]) AND event = 'published' "
               "AND detail->>'delivery' = '1' GROUP BY message_id",
}
WORKERS = {"checkback": "confirm-worker", "redelivery": "recovery-worker",
           "delayed": "recovery-worker"}
# the delivery a path's resolution publishes
DELIVERY = {"checkback": 1, "redelivery": 2, "delayed": 1}
UNITS = {"checkback": "resolved/s", "redelivery": "redelivered/s", "delayed": "published/s"}
POLICY: dict[str, dict[str, Any]] = {
    "checkback": {"check_after_seconds": 86_400},
    "redelivery": {"ack_timeout_seconds": 7 * 86_400},
    "delayed": {"delay_seconds": 86_400},
}


@dataclass(frozen=True)
class WorkerLoad:
    path: str  # checkback | redelivery | delayed
    messages: int
    workers: int = 1
    batch_size: int = 1000
    concurrency: int = 256
    timeout: float = 600.0


def _post(client: httpx.Client, path: str, body: dict[str, Any]) -> None:
    """POST a batch, retried while RMS answers 503/429 or the connection breaks: batches are
    all or nothing, a repeated prepare of the same content and a repeated confirm are no-ops."""
    for _ in range(SEED_ATTEMPTS):
        try:
            response = client.post(path, json=body)
        except httpx.TransportError:
            time.sleep(1.0)
            continue
        if response.status_code not in (429, 503):
            response.raise_for_status()
            return
        time.sleep(float(response.headers.get("retry-after", "1")))
    raise RuntimeError(f"seeding {path} failed {SEED_ATTEMPTS} times (overloaded)")


def _seed(stack: Stack, load: WorkerLoad, ids: list[str]) -> None:
    auth = {"Authorization": f"Bearer {stack.api_key}"}
    policy = POLICY[load.path]
    with httpx.Client(base_url=stack.api_url, headers=auth, timeout=120) as client:
        for start in range(0, len(ids), SEED_BATCH):
            chunk = ids[start:start + SEED_BATCH]
            body = [{"message_id": i, "topic": TOPICS[load.path], "payload": {"id": i},
                     "check_url": stack.check_url} | policy for i in chunk]
            _post(client, "/v1/messages/batch", {"messages": body})
            if load.path != "checkback":
                _post(client, "/v1/messages/batch/confirm", {"message_ids": chunk})
    if load.path == "redelivery":  # delivery 1 is out and seen (and not acked) before the gate
        history.wait_received(receipts_file(stack), set(ids), 1, load.timeout)


async def _analyze(dsn: str) -> None:
    """Current planner statistics for the tables the run works on (step 2 above)."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("ANALYZE messages, message_events")
    finally:
        await conn.close()


def _start_workers(stack: Stack, load: WorkerLoad) -> list[str]:
    env = stack.env(RMS_WORKER_INTERVAL_SECONDS="0.1", RMS_WORKER_BATCH_SIZE=str(load.batch_size),
                    RMS_WORKER_CONCURRENCY=str(load.concurrency), RMS_LOG_LEVEL="INFO",
                    RMS_LOG_JSON="true")
    names = [f"{WORKERS[load.path]}-{n}" for n in range(load.workers)]
    for name in names:
        stack.spawn(name, ["-m", "rms.cli", WORKERS[load.path]], env, group=WORKERS[load.path])
    for name in names:
        stack.wait_log(name, b"worker.started")
    return names


async def _gate_and_wait(dsn: str, path: str, ids: list[str], patience: float
                         ) -> tuple[float, dict[str, float]]:
    """Open the gate; poll until every message is resolved. Returns the gate time and
    message id -> resolution time (database clock, epoch seconds)."""
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.execute(GATES[path], ids)
            gate = float(await conn.fetchval("SELECT extract(epoch FROM now())::float8"))
        deadline, resolved = time.monotonic() + patience, dict[str, float]()
        while len(resolved) < len(ids) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            resolved = {r[0]: r[1] for r in await conn.fetch(RESOLVED[path], ids)}
    finally:
        await conn.close()
    return gate, resolved


def _stages(ids: list[str], gate: float, resolved: dict[str, float], delivery: int,
            receipts: history.Receipts, stored: dict[str, Any]) -> dict[str, Any]:
    resolve, record, done = [], [], []
    for message_id in ids:
        if message_id not in resolved:
            continue
        resolve.append(resolved[message_id] - gate)
        times = [t for d, t in receipts.get(message_id, []) if d == delivery]
        if times:
            record.append(min(times) - resolved[message_id])
            if (s := stored.get(message_id)) and s.done_at:
                done.append(s.done_at - max(times))
    return {"resolve": summarize(resolve), "record": summarize(record), "done": summarize(done)}


def run_worker_path(stack: Stack, load: WorkerLoad, run_id: str) -> dict[str, Any]:
    ids = [f"{run_id}-{n}" for n in range(load.messages)]
    _seed(stack, load, ids)
    asyncio.run(_analyze(stack.dsn))
    names = _start_workers(stack, load)
    try:
        stack.sampler.open_window()
        gate, resolved = asyncio.run(_gate_and_wait(stack.dsn, load.path, ids, load.timeout))
        history.wait_done(stack.dsn, list(resolved), load.timeout)
        usage = stack.sampler.close_window()
    finally:
        for name in names:
            stack.stop_process(name, group=WORKERS[load.path])
    delivery = DELIVERY[load.path]
    receipts = history.read_receipts(receipts_file(stack), set(ids))
    stored = history.stored(stack.dsn, ids)
    seconds = max(resolved.values(), default=gate) - gate
    return {
        "path": load.path, "mode": "workers", "load": f"w={load.workers}", "run_id": run_id,
        "transactions": load.messages, "messages": load.messages,
        "errors": load.messages - len(resolved),
        "error_samples": [] if len(resolved) == load.messages else
        [f"{load.messages - len(resolved)} messages not resolved within {load.timeout:g}s"],
        "seconds": round(seconds, 3), "throughput": rate(len(resolved), seconds),
        "done_per_s": rate(sum(1 for s in stored.values() if s.done_at),
                           max((s.done_at for s in stored.values() if s.done_at),
                               default=gate) - gate),
        "unit": UNITS[load.path],
        "stages": _stages(ids, gate, resolved, delivery, receipts, stored),
        "processes": usage_dict(usage),
        "machine": stack.sampler.machine.as_dict() if stack.sampler.machine else None,
        "verification": verify(dict.fromkeys(resolved, CONFIRMED), stored, receipts).as_dict(),
    }
