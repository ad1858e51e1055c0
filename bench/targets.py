"""The throughput and latency targets set for RMS, judged against a run's figures. Informative
only: the exit code depends on the verification, never on speed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

Judged = tuple[str, str, bool | None]  # target, figure, met (None: not measured in this run)


def _runs(result: dict[str, Any], path: str, mode: str | None = None) -> list[dict[str, Any]]:
    return [r for r in result["runs"] if r["path"] == path and mode in (None, r["mode"])]


def _happy(result: dict[str, Any]) -> Iterator[Judged]:
    closed = _runs(result, "happy", "closed")
    best = max(closed, key=lambda r: r["done_per_s"], default=None)
    if best is None:
        yield "happy path >= 2,000 full tx/s", "not measured", None
        yield "happy path >= 80% of bare", "not measured", None
        return
    yield ("happy path >= 2,000 full tx/s", f"{best['done_per_s']:,.0f} done/s at {best['load']}",
           best["done_per_s"] >= 2000)
    ratio = best.get("rms_over_bare")
    yield ("happy path >= 80% of bare", "no bare run" if ratio is None else f"{ratio:.0%}",
           None if ratio is None else ratio >= 0.8)


def _open_loop(result: dict[str, Any]) -> Iterator[Judged]:
    runs = [r for r in _runs(result, "happy", "open") if r["load"] == "r=1500/s"]
    if not runs:
        yield "p99 prepare and confirm <= 50 ms at 1,500 tx/s open loop", "not measured", None
        return
    run = runs[0]
    p99 = max(run["stages"]["prepare"]["p99_ms"] or 1e9, run["stages"]["confirm"]["p99_ms"] or 1e9)
    yield ("p99 prepare and confirm <= 50 ms at 1,500 tx/s open loop, no errors",
           f"p99 {p99:.1f} ms, {run['errors']} errors", p99 <= 50 and run["errors"] == 0)


def _rate(result: dict[str, Any], path: str, minimum: float, name: str,
          field: str = "throughput", workers: bool = True) -> Judged:
    runs = [r for r in _runs(result, path) if not workers or r["load"] == "w=1"]
    if not runs:
        return name, "not measured", None
    best = max(r[field] for r in runs)
    return name, f"{best:,.0f}/s", best >= minimum


def _soak(result: dict[str, Any]) -> Judged:
    soak = result.get("soak")
    name = "rms serve memory flat over the soak (growth < 5% of the first sample)"
    if not soak:
        return name, "not measured", None
    growth = soak["slope_mb_per_min"] * soak["seconds"] / 60
    return (name, f"{growth:+.1f} MB over {soak['seconds']:.0f}s at {soak['rate']:g} tx/s",
            growth < 0.05 * soak["first_mb"])


def judge(result: dict[str, Any]) -> list[Judged]:
    return [*_happy(result), *_open_loop(result),
            _rate(result, "checkback", 3000, "check-back >= 3,000 resolved/s, 1 worker"),
            _rate(result, "redelivery", 10_000, "redelivery >= 10,000/s, 1 worker"),
            _rate(result, "bulk", 30_000, "bulk >= 30,000 messages/s end to end",
                  field="done_per_s", workers=False),
            _soak(result)]


def render(result: dict[str, Any]) -> list[str]:
    marks = {True: "met", False: "NOT MET", None: "-"}
    lines = ["", "targets (informative; the exit code depends on verification only):"]
    lines += [f"  {marks[met]:<8} {name}: {figure}" for name, figure, met in judge(result)]
    return lines
