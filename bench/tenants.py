"""The two-tenant path: on an ``rms serve`` at its default settings (overload protection on),
one app keeps four times its fair share of the concurrency limit in flight while another sends
a calm load, to show that one tenant's flood is refused before the other's work.

One run, on its own ``rms serve``:

1. the calm tenant alone: the happy path in an open loop at ``--tenants-rate`` for
   ``--tenants-seconds`` (its calm figure);
2. the same calm load again while the flooding tenant (a second app) runs a closed loop of
   happy-path transactions with ``FLOOD_SHARES`` times the fair share (the initial limit
   divided between the two apps) of clients; a flooding client that is refused waits the
   answer's ``Retry-After`` before its next transaction, as the RMS SDKs do (a client that
   ignores it is held by the per-app rate limit, ``RMS_APP_RATE_LIMIT_PER_SECOND``).

Targets, for the calm tenant during the flood: at least ``ANSWERED_SHARE`` of its transactions
answered 2xx throughout, and the p99 of its full transactions (prepare to confirm) within
``P99_FACTOR`` times its p99 alone.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from bench.loadgen import CANCELLED, CONFIRMED
from bench.overload import (
    SERVER,
    LimitWatch,
    Verdict,
    Window,
    p99_ms,
    server_pid,
    start_admission_server,
)
from bench.paths import Load, drive_as, run_load_recorded
from bench.stack import Stack, create_app
from rms.config import Settings

ANSWERED_SHARE = 0.95
P99_FACTOR = 1.5
FLOOD_SHARES = 4
TENANTS = 2
REQUEST_TIMEOUT = 10.0
FLOOD_LEAD_SECONDS = 2.0  # the flood starts this long before the calm load, and outlasts it


def fair_share() -> int:
    """The places each of the two apps holds at the limit (the server's setting)."""
    initial = os.environ.get("RMS_ADMISSION_LIMIT")
    default = Settings.model_fields["admission_limit"].default
    return max(1, (int(initial) if initial else int(default)) // TENANTS)


@dataclass(frozen=True)
class Calm:
    """The calm tenant's transactions in one phase."""

    transactions: int
    answered: int  # prepare and confirm (or cancel) both answered 2xx
    p99_ms: float | None  # full transactions, prepare to confirm
    # event-loop lag p99 (ms) of the calm tenant's load generator and (bucket bound) of the
    # server in the phase: time every latency of the phase carries besides the server's work
    loadgen_lag_p99_ms: float | None = None
    server_lag_p99_ms: float | None = None
    server_loop_cpu: tuple[float, float] | None = None  # share on a CPU, share waiting for one

    @classmethod
    def of(cls, generated: dict[str, Any], watch: LimitWatch | None = None) -> Calm:
        ok = [t for t in generated["transactions"] if t[1] in (CONFIRMED, CANCELLED)]
        window = Window(generated["started"], generated["ended"]) if watch else None
        return cls(len(generated["transactions"]), len(ok),
                   p99_ms([t[4] - t[2] for t in ok]),
                   p99_ms([lag for _, lag in generated.get("loop_lag", [])]),
                   watch.lag_during(window) if watch and window else None,
                   watch.loop_cpu_during(window) if watch and window else None)

    @property
    def share(self) -> float:
        return self.answered / self.transactions if self.transactions else 0.0


def verdicts(alone: Calm, flooded: Calm) -> list[Verdict]:
    """The two targets of the calm tenant, with what the run measured for them."""
    ratio = (None if alone.p99_ms is None or flooded.p99_ms is None or not alone.p99_ms
             else round(flooded.p99_ms / alone.p99_ms, 2))
    return [
        (f"calm tenant answered 2xx during the flood >= {ANSWERED_SHARE:.0%}",
         f"{flooded.share:.1%} ({flooded.answered} of {flooded.transactions})",
         flooded.share >= ANSWERED_SHARE),
        (f"calm tenant p99 during the flood <= {P99_FACTOR:g} x alone",
         f"{flooded.p99_ms} ms vs {alone.p99_ms} ms alone ({ratio} x)",
         ratio is not None and ratio <= P99_FACTOR),
    ]


def _flood(stack: Stack, url: str, api_key: str, seconds: float, run_id: str,
           out: dict[str, Any]) -> None:
    load = Load("tenants", "closed", concurrency=FLOOD_SHARES * fair_share(), duration=seconds,
                request_timeout=REQUEST_TIMEOUT, honor_retry_after=True)
    out.update(drive_as(stack, load, url, run_id, api_key))


def run_tenants(stack: Stack, rate: float, seconds: float, workers: int, run_id: str
                ) -> list[dict[str, Any]]:
    """The calm tenant alone and during the other's flood, as two report rows (the second
    carries the flood's figures and the targets)."""
    url = start_admission_server(stack, workers)
    calm = Load("tenants", "open", phases=((seconds, rate),), request_timeout=REQUEST_TIMEOUT)
    flooded: dict[str, Any] = {}
    try:
        with LimitWatch(url, server_pid(stack, workers)) as watch:
            alone_row, alone = run_load_recorded(stack, calm, url, f"{run_id}-alone")
            # it produces only: the bench app, which consumes the topics, is each message's one
            # subscriber, so the bench consumer's acks finish the flooder's messages too
            flooder = create_app(stack, {"name": f"flooder-{run_id}", "produce_topics": ["bench.*"],
                                         "check_url_prefixes": [stack.check_prefix]})["api_key"]
            flooding = threading.Thread(target=_flood, name="tenants-flood", args=(
                stack, url, flooder, seconds + 2 * FLOOD_LEAD_SECONDS, f"{run_id}-flood", flooded))
            flooding.start()
            time.sleep(FLOOD_LEAD_SECONDS)
            row, during = run_load_recorded(stack, calm, url, f"{run_id}-flooded")
            flooding.join()
    finally:
        stack.stop_process(SERVER, SERVER)
    before, after = Calm.of(alone, watch), Calm.of(during, watch)
    judged = verdicts(before, after)
    flood = _flood_figures(flooded)
    row["tenants"] = {"alone": asdict(before), "flooded": asdict(after),
                      "flood": flood, "targets": judged}
    failed = [f"{target}: {measured}" for target, measured, met in judged if not met]
    failed += flood_problems(flood)
    row["verification"]["passed"] = row["verification"]["passed"] and not failed
    row["verification"]["targets_failed"] = failed
    return [alone_row, row]


def flood_problems(flood: dict[str, Any]) -> list[str]:
    """Why the flood proves nothing, if it does not: a run whose flood did not reach the
    server (no figures, errors instead of answers) would meet the calm tenant's targets
    without being tried."""
    if flood["errors"]:
        return [f"the flood met {flood['errors']} errors, e.g. {flood['error_samples'][:1]}"]
    if flood["answered"] + flood["refusals"] < flood["clients"]:
        return [f"the flood was no flood: {flood['answered']} answered and "
                f"{flood['refusals']} refused from {flood['clients']} clients"]
    return []


def _flood_figures(generated: dict[str, Any]) -> dict[str, Any]:
    transactions = generated.get("transactions", [])
    return {"clients": FLOOD_SHARES * fair_share(), "transactions": len(transactions),
            "answered": sum(1 for t in transactions if t[1] in (CONFIRMED, CANCELLED)),
            "refusals": generated.get("refusals", 0), "errors": generated.get("errors", 0),
            "error_samples": generated.get("error_samples", [])[:3]}
