"""Percentiles and throughput: the arithmetic of the report, free of I/O."""

from __future__ import annotations

import math
from collections.abc import Sequence

PERCENTILES = (50, 95, 99)


def percentile(ordered: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of an already sorted sequence."""
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def summarize(seconds: Sequence[float]) -> dict[str, float | int | None]:
    """Count, p50/p95/p99, max and mean in milliseconds (None when there is no sample)."""
    ordered = sorted(seconds)
    figures: dict[str, float | int | None] = {"count": len(ordered)}
    if not ordered:
        return figures | dict.fromkeys([f"p{p}_ms" for p in PERCENTILES] + ["max_ms", "mean_ms"])
    for p in PERCENTILES:
        figures[f"p{p}_ms"] = round(percentile(ordered, p) * 1000, 2)
    figures["max_ms"] = round(ordered[-1] * 1000, 2)
    figures["mean_ms"] = round(sum(ordered) / len(ordered) * 1000, 2)
    return figures


def rate(count: int, seconds: float) -> float:
    return round(count / seconds, 1) if seconds > 0 else 0.0


def slope_per_minute(series: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of ``(time s, value)`` points, per minute (0 with < 2 points)."""
    if len(series) < 2:
        return 0.0
    n = len(series)
    mean_t = sum(t for t, _ in series) / n
    mean_v = sum(v for _, v in series) / n
    var = sum((t - mean_t) ** 2 for t, _ in series)
    if var == 0:
        return 0.0
    cov = sum((t - mean_t) * (v - mean_v) for t, v in series)
    return round(cov / var * 60, 3)
