"""Series an alert takes the ``increase()`` of exist at 0 before their first event: a series
born at 1 shows Prometheus no increase, and the alert on a process's first dead letter would
never fire (tests/system/monitoring/test_prometheus.py shows it firing on a real Prometheus)."""

from __future__ import annotations

from prometheus_client import REGISTRY

import rms.kafka.failures  # noqa: F401  (defines the publish failure reasons)
from rms.domain.checkback import Outcome
from rms.domain.states import DeadReason
from rms.outage import OutageLog


def sample(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def test_dead_letters_checks_and_publish_failures_start_at_zero() -> None:
    for reason in DeadReason:
        assert sample("rms_dead_letters_total", reason=reason.value) is not None, reason
    for outcome in Outcome:
        assert sample("rms_checks_total", outcome=outcome.value) is not None, outcome
    for failure in ("topic-missing", "timeout", "broker-unavailable", "not-enough-replicas"):
        assert sample("rms_publish_failures_total", reason=failure) is not None, failure


def test_a_loop_reports_healthy_from_its_start() -> None:
    OutageLog("series-from-zero-loop")
    assert sample("rms_loop_failing", component="series-from-zero-loop") == 0
    for cause in ("database", "kafka", "other"):
        assert sample("rms_loop_failures_total", component="series-from-zero-loop",
                      cause=cause) == 0
