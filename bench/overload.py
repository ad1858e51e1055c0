"""The overload path: ``rms serve`` with its overload protection, driven in an open loop
at twice its capacity, to show that it sheds what it cannot serve instead of slowing down for
everyone.

One run, on its own ``rms serve`` (``RMS_ADMISSION_ENABLED=true``, everything else as the
happy path's server):

1. capacity: the happy path, closed loop at the largest ``--concurrency``;
2. an open loop in three phases: ``--overload-calm`` seconds at half the capacity (the normal
   latency), ``--overload-seconds`` at ``--overload-factor`` times the capacity (the overload),
   then ``--overload-calm`` seconds at half the capacity again (the recovery).

The verification passes only when every confirmed message reached ``done``, no cancelled one
was published, and each target holds:

* goodput (transactions whose prepare and confirm or cancel both got 2xx, per second of the
  overload) at least ``GOODPUT_SHARE`` of the capacity;
* p99 of the prepares and confirms answered 2xx during the overload at most ``P99_MS``;
* every other request refused with 503 or 429 carrying ``Retry-After``, p99 of the refusals
  within ``REFUSAL_MS``; no time-out (``REQUEST_TIMEOUT`` seconds), no 5xx other than 503, no
  other error;
* from ``RECOVERY_SECONDS`` after the overload, p99 of the full transactions (prepare to
  confirm) within ``NORMAL_FACTOR`` times the calm phase's before the overload, and nothing
  refused.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.loadgen import (
    CANCELLED,
    CONFIRMED,
    OTHER,
    REFUSAL_STATUSES,
    REFUSED_AFTER_PREPARE,
    TIMEOUT,
)
from bench.paths import Load, run_load, run_load_recorded
from bench.stack import Stack, wait_http
from bench.stats import percentile
from rms.devstack.embedded import free_port

GOODPUT_SHARE = 0.9
P99_MS = 250.0
REFUSAL_MS = 20.0
RECOVERY_SECONDS = 5.0
NORMAL_FACTOR = 1.5
REQUEST_TIMEOUT = 10.0
SERVER = "rms-serve-admission"
LIMIT_METRIC = b"rms_admission_limit "
LAG_BUCKET = b'rms_event_loop_lag_seconds_bucket{le="'
WATCH_SECONDS = 1.0


@dataclass
class LimitWatch:
    """Samples the server's ``rms_admission_limit`` and its event-loop lag histogram
    (``rms_event_loop_lag_seconds``) from its /metrics (never limited) every ``WATCH_SECONDS``
    in a thread, so the report shows where the limit stood in each phase and how long a request
    waited in the server before it was read."""

    url: str
    pid: int | None = None  # the server's: its event loop's time on and waiting for a CPU
    samples: list[tuple[float, float]] = field(default_factory=list)
    lag: list[tuple[float, dict[float, float]]] = field(default_factory=list)  # cumulative
    sched: list[tuple[float, float, float]] = field(default_factory=list)  # time, on, waiting
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> LimitWatch:
        self._thread = threading.Thread(target=self._run, name="limit-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        self._sample()  # one at once, then every WATCH_SECONDS
        while not self._stop.wait(WATCH_SECONDS):
            self._sample()

    def _sample(self) -> None:
        try:
            text = httpx.get(f"{self.url}/metrics", timeout=2).content
        except httpx.HTTPError:
            return
        now = time.time()
        for line in text.splitlines():
            if line.startswith(LIMIT_METRIC):
                with contextlib.suppress(ValueError):
                    self.samples.append((now, float(line[len(LIMIT_METRIC):])))
        self.lag.append((now, lag_buckets(text)))
        if self.pid is not None and (seconds := loop_schedstat(self.pid)) is not None:
            self.sched.append((now, *seconds))

    def loop_cpu_during(self, window: Window) -> tuple[float, float] | None:
        """The share of the window the server's event-loop thread ran on a CPU, and the share
        it was ready to run but waited for one (None without samples around the window)."""
        before = [s for s in self.sched if s[0] < window.start]
        within = [s for s in self.sched if window.holds(s[0])]
        if not before or not within or within[-1][0] <= before[-1][0]:
            return None
        (t0, on0, wait0), (t1, on1, wait1) = before[-1], within[-1]
        return round((on1 - on0) / (t1 - t0), 2), round((wait1 - wait0) / (t1 - t0), 2)

    def during(self, window: Window) -> list[float]:
        return sorted(limit for t, limit in self.samples if window.holds(t))

    def lag_during(self, window: Window, p: float = 99) -> float | None:
        """The server's event-loop lag ``p``-th percentile in the window (100: its longest), in
        ms, as the upper bound of its histogram bucket (None without two samples around the
        window)."""
        before = [buckets for t, buckets in self.lag if t < window.start]
        within = [buckets for t, buckets in self.lag if window.holds(t)]
        if not before or not within:
            return None
        return bucket_percentile({le: within[-1].get(le, 0.0) - count
                                  for le, count in before[-1].items()}, p)


def loop_schedstat(pid: int) -> tuple[float, float] | None:
    """Seconds the main thread of ``pid`` (the event loop) has run on a CPU and has waited,
    runnable, for one (Linux's ``/proc/<pid>/task/<pid>/schedstat``); None where unreadable."""
    try:
        fields = Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()
        return int(fields[0]) / 1e9, int(fields[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def lag_buckets(metrics_text: bytes) -> dict[float, float]:
    """The cumulative buckets of ``rms_event_loop_lag_seconds`` in a /metrics text (a line
    that does not parse is left out)."""
    buckets: dict[float, float] = {}
    for line in metrics_text.splitlines():
        if line.startswith(LAG_BUCKET):
            le, _, count = line[len(LAG_BUCKET):].partition(b'"} ')
            try:
                buckets[math.inf if le == b"+Inf" else float(le)] = float(count)
            except ValueError:
                continue
    return buckets


def bucket_percentile(cumulative: dict[float, float], p: float) -> float | None:
    """The upper bound (ms) of the bucket holding the ``p``-th percentile of a cumulative
    histogram (None when it counts nothing)."""
    bounds = sorted(cumulative)
    total = cumulative[bounds[-1]] if bounds else 0.0
    if total <= 0:
        return None
    for le in bounds:
        if cumulative[le] >= total * p / 100:
            return round(le * 1000, 1)
    return None


@dataclass(frozen=True)
class Window:
    start: float
    end: float

    def holds(self, t: float) -> bool:
        return self.start <= t < self.end


@dataclass(frozen=True)
class Figures:
    """What the overload run measured, and each target's verdict."""

    capacity: float
    offered: float
    goodput: float
    goodput_share: float
    p99_prepare_ms: float | None
    p99_confirm_ms: float | None
    refusals: int
    refusal_p99_ms: float | None
    refusal_max_ms: float | None
    refusals_without_retry_after: int
    timeouts: int
    server_errors: int
    other_errors: int
    calm_p99_ms: float | None
    recovered_p99_ms: float | None
    refused_after_recovery: int
    failed_targets: tuple[str, ...]
    refused_after_prepare: int = 0  # transactions whose prepare was admitted, not the rest
    limit_during_overload: tuple[float, float, float] | None = None  # min, median, max
    # where a refusal's time goes: from the request going out on its connection (the pool's
    # wait for a free connection left out), and the event-loop lag of the load generator (its
    # clock runs late by that much) and of the server (requests wait that long to be read)
    refusal_sent_p99_ms: float | None = None
    loadgen_lag_p99_ms: float | None = None
    loadgen_lag_max_ms: float | None = None
    server_lag_p99_ms: float | None = None


    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def p99_ms(values: list[float]) -> float | None:
    """The p99 of ``values`` (seconds) in ms, rounded to 0.1 (None without values)."""
    return round(percentile(sorted(values), 99) * 1000, 1) if values else None


def _windows(start: float, phases: tuple[tuple[float, float], ...]) -> list[Window]:
    windows, offset = [], start
    for seconds, _ in phases:
        windows.append(Window(offset, offset + seconds))
        offset += seconds
    return windows


def overload_window(generated: dict[str, Any], phases: tuple[tuple[float, float], ...]
                    ) -> Window:
    return _windows(generated["schedule_start"], phases)[1]


def judge(generated: dict[str, Any], phases: tuple[tuple[float, float], ...],
          capacity: float) -> Figures:
    """The figures of a three-phase run (calm, overload, calm) from the load generator's
    transactions and requests; pure, so that each target is tested on made-up records."""
    calm, overload, after = _windows(generated["schedule_start"], phases)
    recovered = Window(after.start + RECOVERY_SECONDS, after.end)
    ok = [t for t in generated["transactions"] if t[1] in (CONFIRMED, CANCELLED)]
    during = [t for t in ok if overload.holds(t[2])]
    requests = generated["requests"]
    refused = [r for r in requests if r[2] in REFUSAL_STATUSES]
    figures = Figures(
        capacity=round(capacity, 1), offered=phases[1][1],
        goodput=round(len(during) / (overload.end - overload.start), 1),
        goodput_share=round(len(during) / (overload.end - overload.start) / capacity, 3),
        p99_prepare_ms=p99_ms([t[3] - t[2] for t in during]),
        p99_confirm_ms=p99_ms([t[4] - t[3] for t in during]),
        refusals=len(refused),
        refusal_p99_ms=p99_ms([r[4] - r[3] for r in refused]),
        refusal_max_ms=round(max(r[4] - r[3] for r in refused) * 1000, 1) if refused else None,
        refusal_sent_p99_ms=p99_ms([r[4] - r[6] for r in refused if len(r) > 6 and r[6]]),
        loadgen_lag_p99_ms=p99_ms(lags := [lag for t, lag in generated.get("loop_lag", [])
                                        if overload.holds(t)]),
        loadgen_lag_max_ms=round(max(lags) * 1000, 1) if lags else None,
        refusals_without_retry_after=sum(1 for r in refused if not r[5]),
        timeouts=sum(1 for r in requests if r[2] == TIMEOUT),
        server_errors=sum(1 for r in requests if isinstance(r[2], int) and r[2] >= 500
                          and r[2] not in REFUSAL_STATUSES),
        other_errors=sum(1 for r in requests if r[2] == OTHER
                         or (isinstance(r[2], int) and 400 <= r[2] < 500
                             and r[2] not in REFUSAL_STATUSES)),
        calm_p99_ms=p99_ms([t[4] - t[2] for t in ok if calm.holds(t[2])]),
        recovered_p99_ms=p99_ms([t[4] - t[2] for t in ok if recovered.holds(t[2])]),
        refused_after_recovery=sum(1 for r in refused if recovered.holds(r[3])),
        failed_targets=(),
        refused_after_prepare=sum(1 for t in generated["transactions"]
                                  if t[1] == REFUSED_AFTER_PREPARE))
    return Figures(**(asdict(figures) | {"failed_targets": tuple(_failed(figures))}))


Verdict = tuple[str, str, bool]  # target, what was measured, met


def verdicts(f: Figures) -> list[Verdict]:
    """Each overload target with what the run measured for it, and whether it was met."""
    normal = None if f.calm_p99_ms is None else f.calm_p99_ms * NORMAL_FACTOR
    answered = [(name, value) for name, value in (("prepare", f.p99_prepare_ms),
                                                  ("confirm", f.p99_confirm_ms))]
    return [
        (f"goodput >= {GOODPUT_SHARE} of capacity", f"{f.goodput_share:.2f}",
         f.goodput_share >= GOODPUT_SHARE),
        *((f"p99 {name} of 2xx answers <= {P99_MS:g} ms", f"{value} ms",
           value is not None and value <= P99_MS) for name, value in answered),
        ("every other request refused with 503 or 429 and Retry-After",
         f"{f.refusals_without_retry_after} refusals without Retry-After, "
         f"{f.other_errors} other errors", not f.refusals_without_retry_after
         and not f.other_errors),
        (f"p99 refusal <= {REFUSAL_MS:g} ms", f"{f.refusal_p99_ms} ms (max {f.refusal_max_ms})",
         f.refusal_p99_ms is None or f.refusal_p99_ms <= REFUSAL_MS),
        ("no time-outs, no 5xx other than 503",
         f"{f.timeouts} time-outs, {f.server_errors} 5xx other than 503",
         not f.timeouts and not f.server_errors),
        (f"p99 {RECOVERY_SECONDS:g} s after the overload <= {NORMAL_FACTOR:g} x calm, nothing "
         "refused", f"{f.recovered_p99_ms} ms (calm {f.calm_p99_ms} ms), "
         f"{f.refused_after_recovery} refused", normal is not None
         and f.recovered_p99_ms is not None and f.recovered_p99_ms <= normal
         and not f.refused_after_recovery),
    ]


def _failed(f: Figures) -> list[str]:
    return [f"{target}: {measured}" for target, measured, met in verdicts(f) if not met]


def start_admission_server(stack: Stack, workers: int) -> str:
    """A second ``rms serve`` of the stack, with its concurrency limit on (and any
    ``RMS_ADMISSION_*`` setting of the benchmark's own environment, to try other limits)."""
    port = free_port()
    tuning = {k: v for k, v in os.environ.items() if k.startswith("RMS_ADMISSION_")}
    stack.spawn(SERVER, ["-m", "rms.cli", "serve", "--port", str(port), "--workers",
                         str(workers)], stack.env(**tuning | {"RMS_ADMISSION_ENABLED": "true"}),
                group=SERVER, measured=True)
    url = f"http://127.0.0.1:{port}"
    wait_http(f"{url}/readyz", stack=stack)
    return url


def server_pid(stack: Stack, workers: int) -> int | None:
    """The process whose event loop serves the requests (None with several workers: the one
    started is their supervisor)."""
    return stack.processes[SERVER].pid if workers == 1 else None


def run_overload(stack: Stack, concurrency: int, seconds: float, calm: float, factor: float,
                 duration: float, workers: int, run_id: str) -> list[dict[str, Any]]:
    """The capacity run and the overload run, as two report rows."""
    url = start_admission_server(stack, workers)
    try:
        measured = run_load(stack, Load("overload", "closed", concurrency=concurrency,
                                        duration=duration), url, f"{run_id}-capacity")
        capacity = measured["throughput"]
        phases = ((calm, capacity / 2), (seconds, capacity * factor), (calm, capacity / 2))
        with LimitWatch(url, server_pid(stack, workers)) as watch:
            row, generated = run_load_recorded(
                stack, Load("overload", "open", phases=phases, request_timeout=REQUEST_TIMEOUT),
                url, run_id)
    finally:
        stack.stop_process(SERVER, SERVER)
    figures = judge(generated, phases, capacity)
    window = overload_window(generated, phases)
    limits = watch.during(window)
    row["overload"] = figures.as_dict() | {
        "targets": verdicts(figures), "server_lag_p99_ms": watch.lag_during(window),
        "server_lag_max_ms": watch.lag_during(window, 100),
        "server_loop_cpu": watch.loop_cpu_during(window),
        "limit_during_overload": (limits[0], limits[len(limits) // 2], limits[-1])
        if limits else None}
    row["verification"]["passed"] = row["verification"]["passed"] and not figures.failed_targets
    row["verification"]["targets_failed"] = list(figures.failed_targets)
    return [measured, row]
