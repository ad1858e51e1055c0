"""The cost and overload targets set for RMS, judged against a run's figures: ratios to the
bare baseline taken in the same run, CPU per unit of work, and the overload path's own verdict.
Informative only: the exit code depends on the verification, never on speed (the overload
path's targets are part of its verification, see :mod:`bench.overload`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

Judged = tuple[str, str, bool | None]  # target, figure, met (None: not measured in this run)

RATIO = 0.95  # RMS happy path / bare baseline, done per second, same load
SERVE_MS_PER_TX = 0.7  # rms serve CPU per full transaction at the largest concurrency
OPEN_P99_FACTOR = 1.5  # open loop: p99 prepare and confirm within this of bare's
BULK_MS_PER_MESSAGE = 0.12  # rms serve + PostgreSQL + Kafka CPU per bulk message
CHECKBACK_RATE, CHECKBACK_MS = 6000.0, 0.1  # resolved/s with one worker; worker CPU each
REDELIVERY_RATE, REDELIVERY_PG_MS = 10_000.0, 0.07  # /s with one worker; PostgreSQL CPU each
FANOUT_RATIO = 0.8  # fan-out (three consumer apps) tx/s / the happy path's, same clients


def _runs(result: dict[str, Any], path: str, mode: str | None = None) -> list[dict[str, Any]]:
    return [r for r in result["runs"] if r["path"] == path and mode in (None, r["mode"])]


def _cpu(run: dict[str, Any], *groups: str) -> float:
    return float(sum(run["processes"].get(group, {}).get("cpu_seconds", 0.0) for group in groups))


def _ms_per(run: dict[str, Any], units: float, *groups: str) -> float:
    return 1000 * _cpu(run, *groups) / max(units, 1)


def _clients(run: dict[str, Any]) -> int:
    return int(run["load"].removeprefix("c="))


def _happy(result: dict[str, Any]) -> Iterator[Judged]:
    closed = sorted(_runs(result, "happy", "closed"), key=_clients)
    for run in closed:
        ratio = run.get("rms_over_bare")
        yield (f"happy {run['load']}: RMS / bare >= {RATIO}",
               "no bare run" if ratio is None else f"{ratio:.2f}",
               None if ratio is None else ratio >= RATIO)
    if not closed:
        yield f"happy: RMS / bare >= {RATIO}", "not measured", None
        return
    largest = closed[-1]
    # per transaction confirmed or cancelled: a refused one is cheap and did no work
    cost = _ms_per(largest, largest.get("completed", largest["transactions"]), "rms-serve")
    yield (f"rms serve CPU per full transaction at {largest['load']} <= {SERVE_MS_PER_TX} ms",
           f"{cost:.2f} ms", cost <= SERVE_MS_PER_TX)


def _p99(run: dict[str, Any], stage: str) -> float | None:
    value: float | None = run["stages"].get(stage, {}).get("p99_ms")
    return value


def _open_loop(result: dict[str, Any]) -> Iterator[Judged]:
    bare = {r["load"]: r for r in _runs(result, "bare", "open")}
    for run in _runs(result, "happy", "open"):
        base = bare.get(run["load"])
        name = f"happy {run['load']}: p99 prepare and confirm <= {OPEN_P99_FACTOR}x bare's"
        if base is None:
            yield name, "no bare run", None
            continue
        pairs = [(_p99(run, s), _p99(base, s)) for s in ("prepare", "confirm")]
        if any(a is None or b is None for a, b in pairs):
            yield name, "no p99", None
            continue
        figure = ", ".join(f"{a:.0f} vs {b:.0f} ms" for a, b in pairs)
        yield name, figure, all(a <= OPEN_P99_FACTOR * b for a, b in pairs)  # type: ignore[operator]


def _transactions(result: dict[str, Any]) -> Iterator[Judged]:
    name = "transactions (3 messages): messages/s >= happy tx/s at the same clients"
    happy = {r["load"]: r for r in _runs(result, "happy", "closed")}
    runs = _runs(result, "transaction")
    if not runs:
        yield name, "not measured", None
    for run in runs:
        single = happy.get(run["load"])
        per_s = run["messages"] / run["seconds"]
        if single is None:
            yield name, f"{per_s:,.0f} messages/s, no happy run", None
            continue
        yield (name, f"{per_s:,.0f} messages/s vs {single['throughput']:,.0f} tx/s",
               per_s >= single["throughput"])


def _fanout(result: dict[str, Any]) -> Iterator[Judged]:
    """Each fan-out run against the happy path at the same clients, and its CPU per ack."""
    happy = {r["load"]: r for r in _runs(result, "happy", "closed")}
    for run in _runs(result, "fanout"):
        name = (f"fan-out {run['load']} ({run['consumers']} consumer apps): tx/s >= "
                f"{FANOUT_RATIO} x happy's")
        single = happy.get(run["load"])
        if single is None or not single["throughput"]:
            yield name, f"{run['throughput']:,.0f} tx/s, no happy run", None
        else:
            ratio = run["throughput"] / single["throughput"]
            yield (name, f"{run['throughput']:,.0f} vs {single['throughput']:,.0f} tx/s "
                         f"({ratio:.2f})", ratio >= FANOUT_RATIO)
        yield (f"fan-out {run['load']}: CPU per ack", f"rms serve "
               f"{_ms_per(run, run['acks'], 'rms-serve'):.3f} ms, PostgreSQL "
               f"{_ms_per(run, run['acks'], 'postgres'):.3f} ms over {run['acks']:,} acks", None)


def _bulk(result: dict[str, Any]) -> Iterator[Judged]:
    name = f"bulk: rms serve + PostgreSQL + Kafka CPU <= {BULK_MS_PER_MESSAGE} ms per message"
    runs = _runs(result, "bulk")
    if not runs:
        yield name, "not measured", None
    for run in runs:
        cost = _ms_per(run, run["messages"], "rms-serve", "postgres", "kafka")
        yield name, f"{cost:.3f} ms", cost <= BULK_MS_PER_MESSAGE


def _worker(result: dict[str, Any], path: str, what: str, rate: float, group: str,
            label: str, limit_ms: float) -> Iterator[Judged]:
    """A worker path's run with one worker: its rate, and ``group``'s CPU per message."""
    for run in (r for r in _runs(result, path) if r["load"] == "w=1"):
        cost = _ms_per(run, run["messages"], group)
        yield (f"{what}, 1 worker: >= {rate:,.0f}/s, {label} CPU <= {limit_ms} ms each",
               f"{run['throughput']:,.0f}/s, {cost:.3f} ms",
               run["throughput"] >= rate and cost <= limit_ms)


def _workers(result: dict[str, Any]) -> Iterator[Judged]:
    yield from _worker(result, "checkback", "check-back", CHECKBACK_RATE, "confirm-worker",
                       "worker", CHECKBACK_MS)
    yield from _worker(result, "redelivery", "redelivery", REDELIVERY_RATE, "postgres",
                       "PostgreSQL", REDELIVERY_PG_MS)


def _overload(result: dict[str, Any]) -> Iterator[Judged]:
    for run in _runs(result, "overload", "open"):
        figures = run.get("overload") or {}
        for target, measured, met in figures.get("targets", []):
            yield f"overload at {run['load']}: {target}", measured, met


def _tenants(result: dict[str, Any]) -> Iterator[Judged]:
    for run in _runs(result, "tenants"):
        for target, measured, met in (run.get("tenants") or {}).get("targets", []):
            yield f"two tenants at {run['load']}: {target}", measured, met


def judge(result: dict[str, Any]) -> list[Judged]:
    return [*_happy(result), *_open_loop(result), *_transactions(result), *_fanout(result),
            *_bulk(result), *_workers(result), *_overload(result), *_tenants(result)]


def render(result: dict[str, Any]) -> list[str]:
    marks = {True: "met", False: "NOT MET", None: "-"}
    lines = ["", "targets (informative; the exit code depends on verification only):"]
    lines += [f"  {marks[met]:<8} {name}: {figure}" for name, figure, met in judge(result)]
    return lines
