"""The fault scenarios, quick mode: each runs concurrent load against real RMS
processes while one kind of fault is injected every few seconds, heals, waits for every
message to settle and runs the invariant checker, which must find nothing.

``make soak`` runs the same scenarios in a loop for half an hour (tests/system/faults/soak.py)."""

from __future__ import annotations

import pytest

from tests.system.faults.cluster import Stack
from tests.system.faults.faults import (
    InTurn,
    KillLeader,
    KillProducer,
    KillServe,
    KillWorker,
    LoseBrokerLog,
    LosePrimary,
    PauseBroker,
    PauseWorker,
    ProxyChaos,
    RestartPostgres,
    RollingRestart,
    TerminateBackends,
)
from tests.system.faults.history import COMMITTED, ROLLED_BACK
from tests.system.faults.load import Mix
from tests.system.faults.proxy import Toxics
from tests.system.faults.scenario import Report, Scenario, run

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300),
              pytest.mark.usefixtures("tasks_dumped_before_the_timeout")]


def assert_clean(report: Report, *faults: str) -> None:
    print(report.describe())
    assert not report.violations, report.describe()
    # design section 4: a dependency that is down answers 503 (retry), never 500
    assert not report.server_errors, report.describe()
    for fault in faults:
        assert report.faults[fault] >= 1, f"{fault} never happened:\n{report.describe()}"
    # the run did exercise the paths the invariants speak about
    assert report.states["done"] and report.states["deleted"], report.describe()
    assert report.ops["kafka-record"] and report.ops["check-back"], report.describe()


def assert_several_consumers(report: Report) -> None:
    """The paths of several consumers per message were taken: a redelivery skipped by the
    consumer that had acked it, a first delivery a consumer crashed on, messages dead for the
    consumer that never acks (a scenario whose faults cut most acks may take none of them)."""
    for seen in ("record-skipped-acked", "crash-before-ack", "audited-message"):
        assert report.ops[seen], f"no {seen}:\n{report.describe()}"
    assert report.states["sent/dead"], report.describe()


async def test_serve_killed_between_commit_and_answer(stack: Stack) -> None:
    report = await run(stack, Scenario("serve-kill", [KillServe()], gap=(2.0, 3.5)), seed=1)
    assert_clean(report, "serve-kill")
    assert report.unanswered, report.describe()  # requests were cut, then retried


async def test_producer_killed_between_prepare_and_confirm(stack: Stack) -> None:
    report = await run(stack, Scenario("producer-kill", [KillProducer()], gap=(1.0, 2.0)),
                       seed=2)
    assert_clean(report, "producer-kill")


def _workers(kind: str) -> Scenario:
    # latency keeps check-backs and publish bookkeeping (and so claims) in flight long enough
    # for a worker to be caught holding claims
    background = {"callback": Toxics(latency=0.3, jitter=0.3),
                  "pg": Toxics(latency=0.01, jitter=0.02),
                  "kafka": Toxics(latency=0.1, jitter=0.1)}
    return Scenario(f"{kind}s", [KillWorker(kind), PauseWorker(kind)], seconds=16.0,
                    gap=(0.5, 1.5), background=background)


async def test_confirm_workers_killed_and_paused_holding_claims(stack: Stack) -> None:
    report = await run(stack, _workers("confirm-worker"), seed=3)
    assert_clean(report)
    held = report.faults["confirm-worker-kill"] + report.faults["confirm-worker-pause"]
    assert held >= 1, report.describe()


async def test_recovery_workers_killed_and_paused_holding_claims(stack: Stack) -> None:
    report = await run(stack, _workers("recovery-worker"), seed=4)
    assert_clean(report)
    held = report.faults["recovery-worker-kill"] + report.faults["recovery-worker-pause"]
    assert held >= 1, report.describe()


async def test_partition_leader_killed_during_a_publish_storm(stack: Stack) -> None:
    report = await run(stack, Scenario("broker-leader-kill", [KillLeader()], seconds=14.0,
                                       clients=8, gap=(1.0, 2.0)), seed=5)
    assert_clean(report, "broker-leader-kill")


async def test_broker_frozen_past_its_session_then_resumed(stack: Stack) -> None:
    report = await run(stack, Scenario("broker-pause", [PauseBroker()], seconds=12.0,
                                       gap=(0.5, 1.0)), seed=10)
    assert_clean(report, "broker-pause")


async def test_rolling_restart_of_the_cluster(stack: Stack) -> None:
    report = await run(stack, Scenario("broker-rolling-restart", [RollingRestart()],
                                       seconds=10.0, gap=(0.5, 1.0)), seed=11)
    assert_clean(report, "broker-rolling-restart")


async def test_single_broker_loses_its_log_during_a_publish_storm(
        single_broker_stack: Stack) -> None:
    report = await run(single_broker_stack,
                       Scenario("broker-lost-log", [LoseBrokerLog()], seconds=14.0, clients=8,
                                gap=(1.0, 2.0)), seed=5)
    assert_clean(report, "broker-lost-log")


async def test_postgres_crashed_and_restarted(stack: Stack) -> None:
    report = await run(stack, Scenario("postgres-crash", [RestartPostgres()], gap=(2.0, 4.0)),
                       seed=6)
    assert_clean(report, "postgres-crash")


async def test_service_connections_terminated_in_a_loop(stack: Stack) -> None:
    report = await run(stack, Scenario("pg-terminate", [TerminateBackends()], gap=(0.3, 1.0)),
                       seed=7)
    assert_clean(report, "pg-terminate-backend", "backends-terminated")


async def test_latency_drops_and_resets_to_postgres_and_callbacks(stack: Stack) -> None:
    report = await run(stack, Scenario("proxy-chaos", [ProxyChaos()], gap=(0.3, 1.0)), seed=8)
    assert_clean(report, "proxy-chaos", "pg-proxy-reset", "kafka-proxy-reset")


async def test_check_back_during_a_still_open_producer_transaction(stack: Stack) -> None:
    plans = {"slow": 70, "commit": 15, "rollback": 15}
    report = await run(stack, Scenario("open-transactions", [], plans=plans), seed=9)
    assert_clean(report)
    assert_several_consumers(report)
    unknown_then = report.open_check_outcomes
    assert unknown_then[COMMITTED] and unknown_then[ROLLED_BACK], report.describe()


async def test_transactions_ordered_keys_delays_and_retention_under_faults(stack: Stack) -> None:
    mix = Mix(transactions=0.35, ordered=0.4, delayed=0.25)
    features = ("transaction", "txn-confirm", "txn-cancel", "ordered-message",
                "delayed-message", "retention-run", "retention-killed")
    report = await run(stack, Scenario("features", [KillServe(), KillProducer(),
                                                    TerminateBackends()],
                                       seconds=16.0, gap=(1.5, 3.0), at_least=3,
                                       must_see=features, mix=mix, retention=True),
                       seed=12)
    print(report.describe())
    assert not report.violations, report.describe()
    assert not report.server_errors, report.describe()
    for feature in features:
        assert report.ops[feature], f"no {feature}:\n{report.describe()}"
    assert not report.ops["retention-final-failed"], report.describe()
    assert report.states["done/archived"] and report.states["deleted/archived"], \
        report.describe()


PROMOTION_BOUND = 30.0  # seconds from the primary's loss to the first answered prepare


async def test_primary_killed_then_switched_over_under_load_loses_nothing(
        failover_stack: Stack) -> None:
    """Patroni with synchronous replication: the primary's PostgreSQL killed under load (the
    standby in sync promoted, the old primary back as a standby), then a switchover. Every 2xx
    survives, claims carry over, RMS answers again within a bound, check-backs and
    deliveries resume."""
    fault = InTurn([LosePrimary("kill"), LosePrimary("switchover")])
    report = await run(failover_stack, Scenario("failover", [fault], seconds=18.0,
                                                gap=(3.0, 4.0), at_least=2), seed=13)
    assert_clean(report, "pg-primary-kill", "pg-switchover", "pg-promotion", "pg-rejoin")
    killed = next(f for f in report.failovers if f.kind == "pg-primary-kill")
    assert killed.first_prepare is not None, report.describe()
    assert killed.first_prepare < PROMOTION_BOUND, report.describe()
    assert killed.rejoined is not None, report.describe()
    assert killed.check_backs_after and killed.records_after, report.describe()
