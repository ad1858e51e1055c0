"""Readiness of a Kafka cluster: a metadata request answers and lists every broker."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from aiokafka import AIOKafkaClient
from aiokafka.structs import TopicPartition

T = TypeVar("T")


def run_coroutine(factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Runs a coroutine to completion from synchronous code, even inside a running event loop."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()


async def broker_ids(bootstrap_servers: str, timeout_ms: int = 2000) -> set[int]:
    client = AIOKafkaClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=timeout_ms)
    try:
        await client.bootstrap()
        return {broker.nodeId for broker in client.cluster.brokers()}
    finally:
        await client.close()


async def partition_leader(bootstrap_servers: str, topic: str, partition: int) -> int | None:
    client = AIOKafkaClient(bootstrap_servers=bootstrap_servers)
    try:
        await client.bootstrap()
        await client._metadata_update(client.cluster, [topic])
        leader = client.cluster.leader_for_partition(TopicPartition(topic, partition))
        return None if leader is None or leader < 0 else int(leader)
    finally:
        await client.close()


def wait_for_brokers(bootstrap_servers: str, expected: set[int], timeout: float,
                     alive: Callable[[], str | None]) -> float:
    """Blocks until metadata lists ``expected`` brokers; returns the seconds waited.

    ``alive`` returns a reason when a node process has died, which ends the wait at once."""
    started = time.monotonic()
    quiet = logging.getLogger("aiokafka")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # refused connections while the JVM starts are expected
    try:
        while time.monotonic() - started < timeout:
            if (reason := alive()) is not None:
                raise RuntimeError(reason)
            if expected <= _listed_brokers(bootstrap_servers):
                return time.monotonic() - started
            time.sleep(0.2)
    finally:
        quiet.setLevel(level)
    raise TimeoutError(f"Kafka at {bootstrap_servers} did not list brokers {sorted(expected)} "
                       f"within {timeout:.0f}s")


def _listed_brokers(bootstrap_servers: str) -> set[int]:
    try:
        return run_coroutine(lambda: broker_ids(bootstrap_servers))
    except Exception:  # not up yet: any client error means "ask again"
        return set()
