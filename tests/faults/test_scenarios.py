"""The fault scenarios of issue 8, quick mode: each runs concurrent load against real RMS
processes while one kind of fault is injected every few seconds, heals, waits for every
message to settle and runs the invariant checker, which must find nothing.

``make soak`` runs the same scenarios in a loop for half an hour (tests/faults/soak.py)."""

from __future__ import annotations

import pytest

from tests.faults.faults import (
    KillProducer,
    KillServe,
    KillWorker,
    PauseWorker,
    ProxyChaos,
    RestartBroker,
    RestartPostgres,
    TerminateBackends,
)
from tests.faults.history import COMMITTED, ROLLED_BACK
from tests.faults.proxy import Toxics
from tests.faults.scenario import Report, Scenario, run
from tests.faults.cluster import Stack

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def assert_clean(report: Report, *faults: str) -> None:
    print(report.describe())
    assert not report.violations, report.describe()
    for fault in faults:
        assert report.faults[fault] >= 1, f"{fault} never happened:\n{report.describe()}"
    # the run did exercise the paths the invariants speak about
    assert report.states["done"] and report.states["deleted"], report.describe()
    assert report.ops["kafka-record"] and report.ops["check-back"], report.describe()


async def test_serve_killed_between_commit_and_answer(stack: Stack) -> None:
    report = await run(stack, Scenario("serve-kill", [KillServe()], gap=(2.0, 3.5)), seed=1)
    assert_clean(report, "serve-kill")
