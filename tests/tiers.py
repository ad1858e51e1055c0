"""The suite's tiers, and what each cost: a plugin of the whole suite (``tests/conftest.py``).

The tiers are the first folder under ``tests/``: ``unit`` (pure logic), ``integration`` (one
PostgreSQL and one Kafka per pytest worker) and ``system`` (several processes, faults,
releases, browsers, other languages). At the end of a run the terminal summary shows each
tier's tests, the time they took (setup, call and teardown summed over every worker) and the
span from its first test's start to its last test's end; ``--durations 25`` (``make test``)
lists the slowest.

The system tier is collected first, so that its long modules start while the workers are
fresh and the shorter integration and unit tests fill the end of the run.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import pytest

TIERS = ("system", "integration", "unit")


def tier_of(nodeid: str) -> str:
    """The tier of a test by its path (``tests/<tier>/...``); a test elsewhere is ``other``."""
    parts = nodeid.split("/", 2)
    return parts[1] if len(parts) > 2 and parts[0] == "tests" and parts[1] in TIERS else "other"


@dataclass
class _Cost:
    tests: set[str] = field(default_factory=set)
    seconds: float = 0.0
    start: float | None = None
    stop: float | None = None

    def add(self, report: pytest.TestReport) -> None:
        self.tests.add(report.nodeid)
        self.seconds += report.duration
        self.start = report.start if self.start is None else min(self.start, report.start)
        self.stop = report.stop if self.stop is None else max(self.stop, report.stop)


_COSTS: dict[str, _Cost] = defaultdict(_Cost)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """System tests first, then integration, then unit (a stable sort: each module keeps its
    order, so its module-scoped servers start once per worker that runs it)."""
    rank = {tier: index for index, tier in enumerate(TIERS)}
    items.sort(key=lambda item: rank.get(tier_of(item.nodeid), len(TIERS)))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _COSTS[tier_of(report.nodeid)].add(report)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _COSTS:
        return
    terminalreporter.section("time per tier")
    for tier in (*TIERS, "other"):
        cost = _COSTS.get(tier)
        if cost is None:
            continue
        span = (cost.stop or 0.0) - (cost.start or 0.0)
        terminalreporter.write_line(
            f"{tier:<12} {len(cost.tests):5d} tests {cost.seconds:8.1f} s of test time, "
            f"{span:7.1f} s from its first start to its last end")
