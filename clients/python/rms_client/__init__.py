"""The RMS client for Python services (the ``rms-client`` distribution).

Producer side: :mod:`rms_client.producer` (prepare / send / confirm / cancel / get, retried
safely, and a transactional helper), :mod:`rms_client.checkback` (the check-back endpoint as
an ASGI app, or a FastAPI router with the ``fastapi`` extra), :mod:`rms_client.barrier` (a
PostgreSQL barrier that tells "still running" from "rolled back"; the ``sqlalchemy`` extra)
and :mod:`rms_client.signing` (Standard Webhooks signatures).

Consumer side: :mod:`rms_client.consumer` (inbox + handler + ack, exactly-once effect; the
inbox needs the ``sqlalchemy`` extra) and :mod:`rms_client.ackers` (its acks, over HTTP or
the ack topic).

The wire format both RMS and its clients speak has its one home here: signatures
(:mod:`rms_client.signing`), ack records (:mod:`rms_client.ack_records`), the W3C trace
context (:mod:`rms_client.trace`, :mod:`rms_client.tracing`), message ids
(:mod:`rms_client.ids`) and timestamps (:mod:`rms_client.timestamps`).

The names below are loaded lazily, on first use, so a producer that imports
``rms_client.producer`` never loads Kafka's client or a database toolkit.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "rms_client.barrier": ("Barrier", "BarrierClosed", "barrier_table"),
    "rms_client.checkback": ("CheckRequest", "MemoryReplayGuard", "ReplayGuard",
                             "TransactionCheckRequest", "checkback_app"),
    "rms_client.checkback_fastapi": ("checkback_router",),
    "rms_client.ackers": ("Ack", "AckResult", "HttpAcker", "TopicAcker", "WrongApp",
                          "make_acker"),
    "rms_client.consumer": ("RmsConsumer", "RmsRecord", "ensure_inbox"),
    "rms_client.kafka_security": ("KafkaSecurity",),
    "rms_client.producer": ("Draft", "MessageInfo", "RetryPolicy", "RmsConflict", "RmsError",
                            "RmsNotFound", "RmsProducer", "RmsUnavailable", "TransactionInfo"),
    "rms_client.signing": ("SignatureError", "Verifier", "signed_headers"),
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
    "WrongApp",
    "barrier_table",
    "checkback_app",
    "checkback_router",
    "ensure_inbox",
    "make_acker",
    "signed_headers",
]

if TYPE_CHECKING:
    from rms_client.ackers import Ack, AckResult, HttpAcker, TopicAcker, WrongApp, make_acker
    from rms_client.barrier import Barrier, BarrierClosed, barrier_table
    from rms_client.checkback import (
        CheckRequest,
        MemoryReplayGuard,
        ReplayGuard,
        TransactionCheckRequest,
        checkback_app,
    )
    from rms_client.checkback_fastapi import checkback_router
    from rms_client.consumer import RmsConsumer, RmsRecord, ensure_inbox
    from rms_client.kafka_security import KafkaSecurity
    from rms_client.producer import (
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
    from rms_client.signing import SignatureError, Verifier, signed_headers


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'rms_client' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
