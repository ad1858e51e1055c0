"""Retry policies: when to check back and when to re-deliver (design section 7)."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DeliveryPolicy:
    check_after_seconds: float = 10.0
    max_checks: int = 15
    check_backoff_cap_seconds: float = 300.0
    ack_timeout_seconds: float = 60.0
    max_deliveries: int = 6
    delivery_backoff_cap_seconds: float = 1800.0


def capped_backoff(base: float, attempt: int, cap: float) -> float:
    """``base * 2**(attempt-1)`` capped at ``cap``; ``attempt`` is 1 for the first wait."""
    exponent = max(0, attempt - 1)
    if exponent >= 64:
        return cap
    return float(min(cap, base * (2**exponent)))


def with_jitter(seconds: float, spread: float = 0.2, rng: random.Random | None = None) -> float:
    """Spread retries of many messages so they do not all come due in the same tick."""
    if seconds <= 0:
        return 0.0
    draw = (rng or random).uniform(1.0 - spread, 1.0 + spread)
    return seconds * draw


def next_check_delay(policy: DeliveryPolicy, checks_made: int) -> float:
    """Seconds to wait after check number ``checks_made`` answered ``unknown``."""
    base = max(policy.check_after_seconds, 0.001)
    return with_jitter(capped_backoff(base, checks_made + 1, policy.check_backoff_cap_seconds))


def ack_deadline(policy: DeliveryPolicy, deliveries_in_budget: int) -> float:
    """Seconds to wait for an ack after delivery number ``deliveries_in_budget`` of this budget."""
    return capped_backoff(
        policy.ack_timeout_seconds, deliveries_in_budget, policy.delivery_backoff_cap_seconds
    )
