"""Prometheus metrics: one home for every name (docs/operations/monitoring.md lists them for alerts)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from rms.domain.ack_outcomes import UNRECORDED
from rms.domain.checkback import Outcome
from rms.domain.states import DeadReason

TRANSITIONS = Counter("rms_transitions_total", "State transitions applied", ["event"])
PUBLISHES = Counter("rms_publishes_total", "Records accepted by the broker")
PUBLISH_FAILURES = Counter("rms_publish_failures_total",
                           "Publishes the broker did not accept, by reason (topic-missing, timeout, "
                           "broker-unavailable, not-enough-replicas, too-large, not-authorized, "
                           "producer-reset, refused)", ["reason"])
PUBLISH_SECONDS = Histogram(
    "rms_publish_seconds", "Time for the broker to accept a record",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
KAFKA_TRANSACTION_RECORDS = Histogram(
    "rms_kafka_transaction_records",
    "Records written by one Kafka transaction (the atomic publishes it group-committed)",
    buckets=(1, 2, 3, 5, 10, 20, 50, 100, 200, 500),
)
ACKS = Counter("rms_acks_total", "Acks recorded, one per consumer of a message", ["via"])
ACKS_REJECTED = Counter("rms_acks_rejected_total", "Ack-topic records ignored", ["reason"])
ACKS_NOT_RECORDED = Counter(
    "rms_acks_not_recorded_total",
    "Acks of a permitted consumer that recorded nothing, by why (a repeat, a message done "
    "already, a consumer that is not a subscriber, a message not sent)", ["via", "reason"])
ACK_BATCHES_SET_ASIDE = Counter(
    "rms_ack_batches_set_aside_total",
    "Ack-topic batches that kept failing while PostgreSQL answered, applied record by record "
    "after RMS_ACK_BATCH_MAX_TRIES tries")
CHECKS = Counter("rms_checks_total", "Check-back calls by outcome", ["outcome"])
CHECK_SECONDS = Histogram("rms_check_seconds", "Check-back call latency")
CHECK_BATCH = Histogram("rms_check_batch_size",
                        "Messages (or transactions) claimed per check-back batch",
                        buckets=(0, 1, 5, 10, 50, 100, 200, 500, 1000))
SCHEDULED = Counter("rms_scheduled_total",
                    "Confirmed messages whose first publish waits for their deliver_after")
SCHEDULED_PUBLISHES = Counter("rms_scheduled_publishes_total",
                              "Delayed messages published by the recovery service when due")
SCHEDULED_LATENESS = Histogram(
    "rms_scheduled_lateness_seconds",
    "How long after its deliver_after a delayed message was handed to the broker",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300))
REDELIVERIES = Counter("rms_redeliveries_total", "Records re-published by the recovery service")
DEAD_LETTERS = Counter("rms_dead_letters_total", "Messages flagged dead", ["reason"])
OLDEST_PENDING_SEND = Gauge("rms_oldest_pending_send_age_seconds",
                            "Age of the oldest non-dead pending-send message")
OLDEST_UNACKED = Gauge("rms_oldest_unacked_age_seconds",
                       "Age since confirm of the oldest non-dead unacknowledged sent message")
CONSUMER_UNACKED = Gauge("rms_consumer_unacked_messages",
                         "Sent messages a consumer app is a subscriber of and has not acked",
                         ["consumer"])
CONSUMER_OLDEST_UNACKED = Gauge("rms_consumer_oldest_unacked_seconds",
                                "Age since confirm of the oldest sent message a consumer app "
                                "has not acked", ["consumer"])
CONSUMER_SECONDS_SINCE_ACK = Gauge(
    "rms_consumer_seconds_since_ack",
    "Seconds since an ack of a consumer app that owes messages was last recorded (since it "
    "was registered when none was)", ["consumer"])
OLDEST_DUE_CHECK_LAG = Gauge("rms_oldest_due_check_lag_seconds",
                             "How far past its check time the oldest due check-back is")
REDELIVERY_BATCH = Histogram("rms_redelivery_batch_size",
                             "Messages claimed per recovery-worker round",
                             buckets=(0, 1, 5, 10, 50, 100, 200, 500, 1000))
DEAD_LETTERS_RESENT = Counter("rms_dead_letters_resent_total",
                              "Dead letters resent by an operator's bulk resend")
LOOP_FAILURES = Counter("rms_loop_failures_total",
                        "Failed rounds of a worker tick or the ack consumer, by cause "
                        "(database, kafka, other)", ["component", "cause"])
LOOP_FAILING = Gauge("rms_loop_failing", "1 while the component's rounds keep failing",
                     ["component"])
PRODUCER_RESETS = Counter("rms_kafka_producer_resets_total",
                          "Kafka producers replaced after a fatal error (out-of-order sequence, "
                          "unknown producer id, fenced)")
ACK_TOPIC_MISSING = Gauge("rms_ack_topic_missing",
                          "1 while the cluster has no ack topic (RMS_ACK_TOPIC): acks on it wait")
DB_CONNECTIONS_DISCARDED = Counter("rms_db_connections_discarded_total",
                                   "Pooled database connections closed because they were unusable "
                                   "(open-transaction: left inside a transaction nobody owns)",
                                   ["reason"])
ADMISSION_LIMIT = Gauge("rms_admission_limit",
                        "Producer and consumer API requests of new work admitted at once")
ADMISSION_REFUSED = Counter("rms_admission_refused_total",
                            "Requests refused with 503 by overload protection")
EVENT_LOOP_LAG = Histogram(
    "rms_event_loop_lag_seconds",
    "How late a timer of the API's event loop runs (every request waits about this long before "
    "it is read, refusals included)",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56),
)


@dataclass(frozen=True)
class RetentionFigures:
    """What ``rms retention run`` recorded in the database (``retention_status``)."""

    last_run_at: datetime | None = None
    last_success_at: datetime | None = None
    last_failure_at: datetime | None = None
    runs: int = 0
    failures: int = 0
    messages_removed: int = 0
    messages_archived: int = 0
    events_removed: int = 0


class RetentionCollector(Collector):
    """Retention runs as a CLI job (no process to scrape): each run writes its figures to the
    database and the API exports the latest ones at every scrape of /metrics."""

    def __init__(self) -> None:
        self.figures: RetentionFigures | None = None  # None: not read (yet) in this process

    def collect(self) -> Iterator[Metric]:
        found = self.figures
        if found is None:
            return
        for family, moment in (
                (GaugeMetricFamily("rms_retention_last_run_timestamp_seconds",
                                   "When the last retention run ended (Unix time)"),
                 found.last_run_at),
                (GaugeMetricFamily("rms_retention_last_success_timestamp_seconds",
                                   "When the last successful retention run ended (Unix time)"),
                 found.last_success_at),
                (GaugeMetricFamily("rms_retention_last_failure_timestamp_seconds",
                                   "When the last failed retention run ended (Unix time)"),
                 found.last_failure_at)):
            if moment is not None:
                family.add_metric([], moment.timestamp())
                yield family
        for counter, value in (
                (CounterMetricFamily("rms_retention_runs",
                                     "Retention runs (dry runs excluded)"), found.runs),
                (CounterMetricFamily("rms_retention_failures",
                                     "Retention runs that failed (the next run resumes)"),
                 found.failures),
                (CounterMetricFamily("rms_retention_messages_removed",
                                     "Finished messages retention removed"),
                 found.messages_removed),
                (CounterMetricFamily("rms_retention_messages_archived",
                                     "Of them, written to the archive first"),
                 found.messages_archived),
                (CounterMetricFamily("rms_retention_events_removed",
                                     "Events retention removed with them"),
                 found.events_removed)):
            counter.add_metric([], value)
            yield counter


def count_from_zero(counter: Counter, label_values: list[str]) -> None:
    """Export each labelled series at 0 from the start: ``increase()`` and ``rate()`` see no
    increase in a series whose first sample is already 1, so an alert on the first dead letter
    (or first failure of a reason) of a process would never fire."""
    for value in label_values:
        counter.labels(value)


count_from_zero(DEAD_LETTERS, [reason.value for reason in DeadReason])
count_from_zero(CHECKS, [outcome.value for outcome in Outcome])
count_from_zero(DB_CONNECTIONS_DISCARDED, ["open-transaction"])
for _via in ("http", "ack-topic"):
    for _reason in UNRECORDED:
        ACKS_NOT_RECORDED.labels(_via, _reason)

RETENTION = RetentionCollector()
REGISTRY.register(RETENTION)
