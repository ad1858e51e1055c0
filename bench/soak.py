"""The soak: the happy path in the open loop at a fixed rate for a long time while the RSS of
``rms serve`` (all its processes) is sampled; prints first / last / peak and the slope."""

from __future__ import annotations

from typing import Any

from bench.paths import Load, run_load
from bench.stack import Stack
from bench.stats import slope_per_minute

GROUP = "rms-serve"


def run_soak(stack: Stack, seconds: float, rate: float, run_id: str
             ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Returns the soak summary and the run's row for the table."""
    stack.sampler.series[GROUP].clear()
    stack.sampler.record_series.add(GROUP)
    try:
        row = run_load(stack, Load("soak", "open", rate=rate, duration=seconds),
                       stack.api_url, run_id)
    finally:
        stack.sampler.record_series.discard(GROUP)
    series = list(stack.sampler.series[GROUP])
    values = [v for _, v in series] or [0.0]
    return {"seconds": seconds, "rate": rate, "samples": len(series),
            "first_mb": round(values[0], 1), "last_mb": round(values[-1], 1),
            "peak_mb": round(max(values), 1), "slope_mb_per_min": slope_per_minute(series),
            "series": [(round(t, 2), round(v, 1)) for t, v in series[::max(1, len(series) // 600)]]
            }, row
