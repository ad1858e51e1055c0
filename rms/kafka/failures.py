"""Why a publish failed, in the words operators see in metrics, events, stats and logs."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal, get_args

from aiokafka import errors

from rms import metrics

FailureReason = Literal["topic-missing", "not-authorized", "too-large", "not-enough-replicas",
                        "timeout", "broker-unavailable", "producer-reset", "refused",
                        "transaction-aborted"]
metrics.count_from_zero(metrics.PUBLISH_FAILURES, list(get_args(FailureReason)))

# errors after which an idempotent producer cannot go on (its sequence numbers no longer match
# the broker's, for example after a leader change lost the last batches): only a new producer,
# with a new producer id, can publish again
PRODUCER_FATAL: tuple[type[BaseException], ...] = (
    errors.OutOfOrderSequenceNumber, errors.UnknownProducerId, errors.InvalidProducerEpoch,
    errors.InvalidProducerIdMapping, errors.ProducerFenced, errors.ProducerClosed)

_BY_TYPE: tuple[tuple[tuple[type[BaseException], ...], FailureReason], ...] = (
    (PRODUCER_FATAL, "producer-reset"),
    ((errors.UnknownTopicOrPartitionError, errors.InvalidTopicError), "topic-missing"),
    ((errors.TopicAuthorizationFailedError, errors.ClusterAuthorizationFailedError),
     "not-authorized"),
    ((errors.MessageSizeTooLargeError, errors.RecordListTooLargeError), "too-large"),
    ((errors.NotEnoughReplicasError, errors.NotEnoughReplicasAfterAppendError),
     "not-enough-replicas"),
    ((errors.KafkaTimeoutError, errors.RequestTimedOutError, TimeoutError), "timeout"),
    ((errors.KafkaConnectionError, errors.NodeNotReadyError, errors.NotLeaderForPartitionError,
      errors.LeaderNotAvailableError, OSError), "broker-unavailable"),
)


@dataclass(frozen=True)
class PublishFailure:
    reason: FailureReason
    error: str


def classify(exc: BaseException) -> PublishFailure:
    text = f"{type(exc).__name__}: {exc}"
    for types, reason in _BY_TYPE:
        if isinstance(exc, types):
            return PublishFailure(reason, text)
    return PublishFailure("refused", text)


class MissingTopics:
    """Topics the cluster said it lacks, each remembered for ``remember_seconds``."""

    def __init__(self, remember_seconds: float) -> None:
        self._remember = remember_seconds
        self._until: dict[str, float] = {}

    def add(self, topic: str) -> None:
        self._until[topic] = time.monotonic() + self._remember

    def failure(self, topic: str) -> PublishFailure | None:
        until = self._until.get(topic)
        if until is None:
            return None
        if time.monotonic() >= until:
            del self._until[topic]
            return None
        return PublishFailure("topic-missing", f"topic {topic!r} does not exist on the cluster")
