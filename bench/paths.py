"""The HTTP-driven paths (happy, one-shot, bulk, ordered, and the bare baseline's happy path):
one load generator process per run, then wait until every confirmed message is ``done``, then
stages, CPU per process and the verification.

The ordered path is the happy path on a topic of the app's ``ordered_topics`` with keys
``k0..k<keys-1>``: its confirms do not publish; a recovery worker (started for the run) publishes
each key in confirm order, so ``done_per_s`` and the publish stage show what ordering costs.

Throughput: ``throughput`` = transactions completed without error (confirmed or cancelled)
per second of the load generator's run (messages per second for bulk); ``done_per_s`` = messages that reached
``done`` per second from the run's start to the last ``done_at`` (end to end).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from bench import history
from bench.loadgen import DROPPED, ERROR, REFUSED, REFUSED_AFTER_PREPARE, Spec, message_ids
from bench.procs import Usage
from bench.stack import LOADGEN_PREFIX, TOPICS, Stack, receipts_file
from bench.stages import load_stages
from bench.stats import rate, summarize
from bench.verify import CANCELLED, CONFIRMED, verify

DONE_GRACE_SECONDS = 60.0


@dataclass(frozen=True)
class Load:
    """One run's shape: ``path`` in happy/oneshot/bulk/transaction/bare, ``mode``
    closed/open."""

    path: str
    mode: str
    concurrency: int = 1
    rate: float = 0.0
    transactions: int | None = None
    duration: float = 5.0
    batch_size: int = 500
    keys: int = 0  # the ordered path: distinct keys
    phases: tuple[tuple[float, float], ...] = ()  # open loop: (seconds, rate) one after another
    request_timeout: float = 0.0  # >0: a request not answered by then is a time-out
    consumers: int = 1  # subscribers of each message (the fan-out path's consumer apps)
    honor_retry_after: bool = False  # closed loop: a refused client waits Retry-After

    @property
    def label(self) -> str:
        if self.phases:
            return "r=" + "/".join(f"{rate:.0f}" for _, rate in self.phases)
        load = f"c={self.concurrency}" if self.mode == "closed" else f"r={self.rate:g}/s"
        return f"{load} keys={self.keys}" if self.keys else load


def _spec(stack: Stack, load: Load, base_url: str, run_id: str) -> Spec:
    kind = ("happy" if load.path in ("bare", "soak", "ordered", "overload", "tenants", "fanout")
            else load.path)
    return Spec(base_url=base_url, token=stack.api_key, kind=kind, mode=load.mode,
                id_prefix=run_id, topic=TOPICS[load.path], check_url=stack.check_url,
                concurrency=load.concurrency, rate=load.rate, transactions=load.transactions,
                duration=load.duration, batch_size=load.batch_size,
                cancel_every=0 if kind == "oneshot" else 20, keys=load.keys,
                phases=[list(phase) for phase in load.phases],
                request_timeout=load.request_timeout, record_requests=bool(load.phases),
                honor_retry_after=load.honor_retry_after)


def _drive(stack: Stack, spec: Spec, run_id: str) -> dict[str, Any]:
    spec_file, out_file = stack.work / f"{run_id}.spec.json", stack.work / f"{run_id}.out.json"
    spec_file.write_text(json.dumps(asdict(spec)))
    process = stack.spawn(f"{LOADGEN_PREFIX}{run_id}", ["-m", "bench.loadgen", str(spec_file),
                                                str(out_file)], group="loadgen")
    while process.poll() is None:
        stack.check_alive()
        time.sleep(0.1)
    stack.processes.pop(f"{LOADGEN_PREFIX}{run_id}", None)
    if process.returncode != 0:
        raise RuntimeError(f"the load generator failed; see {stack.work}/loadgen-{run_id}.log")
    result: dict[str, Any] = orjson.loads(out_file.read_bytes())
    return result


def _expected(spec: Spec, transactions: list[list[Any]]) -> dict[str, str]:
    expected = {}
    for n, outcome, *_ in transactions:
        if outcome not in (ERROR, DROPPED, REFUSED, REFUSED_AFTER_PREPARE):
            for message_id in message_ids(spec.kind, spec.id_prefix, n, spec.batch_size):
                expected[message_id] = outcome
    return expected


SEQUENCER = "recovery-worker"


def run_load(stack: Stack, load: Load, base_url: str, run_id: str) -> dict[str, Any]:
    row, _ = run_load_recorded(stack, load, base_url, run_id)
    return row


def run_load_recorded(stack: Stack, load: Load, base_url: str, run_id: str,
                      receipts_path: Path | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """One run: its report row, and what the load generator wrote (every transaction, and
    every request when the load has phases). ``receipts_path``: where the consumer of the
    run's topic writes what it received (default the bench consumer's)."""
    spec = _spec(stack, load, base_url, run_id)
    if load.keys:  # the ordered messages are published by a recovery worker's sequencer
        stack.spawn(f"{SEQUENCER}-{run_id}", ["-m", "rms.cli", SEQUENCER], stack.env(
            RMS_WORKER_INTERVAL_SECONDS="0.1", RMS_WORKER_CONCURRENCY="256"), group=SEQUENCER)
        stack.wait_log(f"{SEQUENCER}-{run_id}", b"worker.started")
    stack.sampler.open_window()
    generated = _drive(stack, spec, run_id)
    expected = _expected(spec, generated["transactions"])
    confirmed = [i for i, outcome in expected.items() if outcome == CONFIRMED]
    history.wait_done(stack.dsn, confirmed, DONE_GRACE_SECONDS + load.duration)
    usage = stack.sampler.close_window()
    if load.keys:
        stack.stop_process(f"{SEQUENCER}-{run_id}", SEQUENCER)
    sampled = usage.get("loadgen", Usage(0.0, 0.0))  # its own rusage: exact even if short-lived
    usage["loadgen"] = Usage(round(generated["cpu_seconds"], 3), sampled.peak_rss_mb)
    receipts = history.read_receipts(receipts_path or receipts_file(stack), set(expected))
    stored = history.stored(stack.dsn, list(expected))
    verdict = verify(expected, stored, receipts, load.consumers)
    stages = load_stages(generated["transactions"],
                         lambda n: message_ids(spec.kind, spec.id_prefix, n, spec.batch_size),
                         receipts, stored)
    ok = sum(1 for t in generated["transactions"] if t[1] in (CONFIRMED, CANCELLED))
    per_tx = spec.batch_size if spec.kind == "bulk" else 1
    done_at = [s.done_at for i in confirmed if (s := stored.get(i)) and s.done_at]
    return {
        "path": load.path, "mode": load.mode, "load": load.label, "run_id": run_id,
        "keys": load.keys, "consumers": load.consumers,
        "transactions": len(generated["transactions"]), "completed": ok,
        "messages": len(expected),
        "errors": generated["errors"], "error_samples": generated["error_samples"],
        "timeouts": generated["timeouts"], "refusals": generated["refusals"],
        "dropped_connection_retries": generated.get("dropped_connection_retries", 0),
        "seconds": round(generated["ended"] - generated["started"], 3),
        "throughput": rate(ok * per_tx, generated["ended"] - generated["started"]),
        "done_per_s": rate(len(done_at), max(done_at, default=0) - generated["started"]),
        "unit": "messages/s" if spec.kind == "bulk" else "tx/s",
        "stages": {name: summarize(v) for name, v in stages.as_dict().items()},
        "processes": usage_dict(usage),
        "machine": stack.sampler.machine.as_dict() if stack.sampler.machine else None,
        "verification": verdict.as_dict(),
    }, generated


def warm_up(stack: Stack, base_url: str, run_id: str, transactions: int = 200) -> None:
    """Unmeasured transactions (connections, caches, first publishes) before the first run;
    their messages still have to reach ``done``."""
    path = "happy" if base_url == stack.api_url else "bare"
    run_load(stack, Load(path, "closed", concurrency=8, transactions=transactions), base_url,
             run_id)


def usage_dict(usage: dict[str, Usage]) -> dict[str, dict[str, float]]:
    return {group: asdict(u) for group, u in sorted(usage.items())}


def drive_as(stack: Stack, load: Load, base_url: str, run_id: str, api_key: str
             ) -> dict[str, Any]:
    """The load generator's output for ``load`` sent as another app (its API key), without
    waiting for ``done`` or verifying: a load beside a measured one."""
    return _drive(stack, replace(_spec(stack, load, base_url, run_id), token=api_key), run_id)
