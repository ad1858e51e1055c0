"""The RMS Python SDK.

Producer side: :mod:`rms.sdk.producer` (prepare / send / confirm / cancel / get, retried
safely, and a transactional helper), :mod:`rms.sdk.checkback` (the check-back endpoint as a
FastAPI router), :mod:`rms.sdk.barrier` (a PostgreSQL barrier that tells "still running" from
"rolled back") and :mod:`rms.sdk.signing` (Standard Webhooks signatures).

Consumer side: :mod:`rms.sdk.consumer` (inbox + handler + ack, exactly-once effect).

The names below are loaded lazily, on first use, so a producer that imports
``rms.sdk.producer`` never loads Kafka's client and a consumer never loads FastAPI.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "rms.sdk.barrier": ("Barrier", "BarrierClosed", "barrier_table"),
    "rms.sdk.checkback": ("CheckRequest", "MemoryReplayGuard", "ReplayGuard",
                          "TransactionCheckRequest", "checkback_router"),
    "rms.sdk.consumer": ("Ack", "AckResult", "HttpAcker", "KafkaSecurity", "RmsConsumer",
                         "RmsRecord", "TopicAcker", "ensure_inbox", "make_acker"),
    "rms.sdk.producer": ("Draft", "MessageInfo", "RetryPolicy", "RmsConflict", "RmsError",
                         "RmsNotFound", "RmsProducer", "RmsUnavailable", "TransactionInfo"),
    "rms.sdk.signing": ("SignatureError", "Verifier", "signed_headers"),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = [
    "Ack",
    "AckResult",
    "Barrier",
    "BarrierClosed",
    "CheckRequest",
    "Draft",
    "HttpAcker",
    "KafkaSecurity",
    "MemoryReplayGuard",
    "MessageInfo",
    "ReplayGuard",
    "RetryPolicy",
    "RmsConflict",
    "RmsConsumer",
    "RmsError",
    "RmsNotFound",
    "RmsProducer",
    "RmsRecord",
    "RmsUnavailable",
    "SignatureError",
    "TopicAcker",
    "TransactionCheckRequest",
    "TransactionInfo",
    "Verifier",
    "barrier_table",
    "checkback_router",
    "ensure_inbox",
    "make_acker",
    "signed_headers",
]

if TYPE_CHECKING:
    from rms.sdk.barrier import Barrier, BarrierClosed, barrier_table
    from rms.sdk.checkback import (
        CheckRequest,
        MemoryReplayGuard,
        ReplayGuard,
        TransactionCheckRequest,
        checkback_router,
    )
    from rms.sdk.consumer import (
        Ack,
        AckResult,
        HttpAcker,
        KafkaSecurity,
        RmsConsumer,
        RmsRecord,
        TopicAcker,
        ensure_inbox,
        make_acker,
    )
    from rms.sdk.producer import (
        Draft,
        MessageInfo,
        RetryPolicy,
        RmsConflict,
        RmsError,
        RmsNotFound,
        RmsProducer,
        RmsUnavailable,
        TransactionInfo,
    )
    from rms.sdk.signing import SignatureError, Verifier, signed_headers


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'rms.sdk' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
