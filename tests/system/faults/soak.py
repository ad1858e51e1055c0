"""The long soak: the fault scenarios in a loop, every fault kind mixed, one every few seconds,
for ``SOAK_SECONDS`` (default 1800), on a three-node Kafka cluster (leader kills, frozen
brokers, rolling restarts) and now and then on a single broker that loses its log. The load
mixes transactions, ordered keys and delayed messages, and retention runs (some killed) go on
beside it. The soak starts with a rolling upgrade from the previous release under that load
(``tests/system/faults/upgrade.py``, on its own PostgreSQL and broker), so every migration is tried
while the previous release's processes run on it. Prints each round's report and a summary
at the end: operations by kind, faults injected by kind, invariant violations (must be 0).
Exits 1 on any violation or harness error. SIGINT, SIGTERM, SIGHUP and the death of its parent
stop everything it started (exit 130).

``--failover sync`` runs on a PostgreSQL that fails over (Patroni, synchronous replication):
the primary killed, its whole node killed, switchovers, next to every other fault.
``--failover async`` runs the same with asynchronous replication: what a failover loses is
then the measured contrast the operations guide warns about, reported and not counted.
``--only`` keeps the named faults.

    make soak                                  # 30 minutes
    SOAK_SECONDS=300 .venv/bin/python -m tests.system.faults.soak --seed 7
    .venv/bin/python -m tests.system.faults.soak --failover sync
    .venv/bin/python -m tests.system.faults.soak --failover async --only pg-primary-kill --seconds 120
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from rms.devstack.reaper import Stopped, die_with_parent, stop_on_signals
from tests.system.faults import ha
from tests.system.faults.checker import summary
from tests.system.faults.cluster import Infra, Stack, running_stack
from tests.system.faults.faults import Fault, every_fault
from tests.system.faults.history import Violation
from tests.system.faults.load import Mix
from tests.system.faults.release import Release, ReleaseMissing, previous_release
from tests.system.faults.scenario import FailoverReport, Report, Scenario, run
from tests.system.faults.upgrade import RollingUpgrade, previous_schema

ROUND_SECONDS = 60.0  # load per round; then heal, settle and check
ROUNDS_PER_STACK = 4  # fresh RMS processes now and then
GAP = (1.0, 3.0)  # seconds between two faults
HUNT = 5.0  # seconds a worker fault waits for the worker to hold claims
SINGLE_EVERY = 4  # every 4th stack runs on the single broker (lost-log faults)


@dataclass
class Totals:
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    rounds: int = 0
    messages: int = 0
    ops: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    states: Counter[str] = field(default_factory=Counter)
    server_errors: Counter[str] = field(default_factory=Counter)
    violations: list[Violation] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    failovers: list[FailoverReport] = field(default_factory=list)
    contrast: list[Violation] = field(default_factory=list)
    notes: Counter[str] = field(default_factory=Counter)

    def add(self, report: Report) -> None:
        self.rounds += 1
        self.failovers += report.failovers
        self.contrast += report.contrast
        self.notes.update(n.split(":")[0] for n in report.notes)
        self.messages += report.messages
        self.ops += report.ops
        self.faults += report.faults
        self.states += report.states
        self.server_errors += report.server_errors
        self.violations += report.violations

    def _failovers(self) -> list[str]:
        if not self.failovers:
            return []
        answered = sorted(f.first_prepare for f in self.failovers
                          if f.kind != "pg-switchover" and f.first_prepare is not None)
        lines = [f"failovers: {len(self.failovers)}; primary loss to the first answered "
                 f"prepare: {_spread(answered)}"]
        lines += [f"  {f}" for f in self.failovers]
        if self.contrast or any(f.lost_window is not None for f in self.failovers):
            lines.append(f"asynchronous replication, loss window (documented contrast, not "
                         f"counted): {len(self.contrast)} {summary(self.contrast)}")
        return lines

    def render(self, command: str) -> str:
        ended = datetime.now(UTC)
        injected = sum(n for kind, n in self.faults.items() if kind != "backends-terminated")
        lines = [
            "=" * 72, "SOAK SUMMARY", f"command: {command}",
            f"started {self.started:%Y-%m-%d %H:%M:%S}Z, ended {ended:%H:%M:%S}Z "
            f"({(ended - self.started).total_seconds() / 60:.1f} min)",
            f"rounds: {self.rounds}; messages: {self.messages} {dict(self.states)}",
            f"operations: {sum(self.ops.values())} {dict(sorted(self.ops.items()))}",
            f"faults injected: {injected} {dict(sorted(self.faults.items()))}",
            f"invariant violations: {len(self.violations)} {summary(self.violations)}",
            f"500 answers (an outage should answer 503): {dict(self.server_errors)}",
            f"harness errors: {len(self.errors)}",
            f"notes (reported, not violations): {dict(self.notes)}",
            *self._failovers(),
        ]
        lines += [f"  {v}" for v in self.violations[:50]] + [f"  {e}" for e in self.errors]
        return "\n".join(lines)


def _spread(values: Sequence[float]) -> str:
    if not values:
        return "none measured"
    return (f"min {values[0]:.1f}s, median {values[len(values) // 2]:.1f}s, "
            f"max {values[-1]:.1f}s over {len(values)}")


@dataclass(frozen=True)
class Plan:
    """Which faults a soak injects: ``failover`` None, ``sync`` or ``async``; ``only`` names."""

    failover: str | None = None
    only: frozenset[str] = frozenset()

    def faults(self, stack: Stack) -> list[Fault]:
        chosen = every_fault(stack.infra.brokers, HUNT, failover=self.failover is not None)
        return [f for f in chosen if not self.only or f.name in self.only]


async def _rounds(stack: Stack, totals: Totals, deadline: float, seed: int, plan: Plan) -> None:
    for _ in range(ROUNDS_PER_STACK):
        left = deadline - time.monotonic()
        if left < 5:
            return
        scenario = Scenario(f"soak-{totals.rounds + 1}", plan.faults(stack),
                            seconds=min(ROUND_SECONDS, left), gap=GAP, retention=True,
                            contrast=plan.failover == "async")
        report = await run(stack, scenario, seed + totals.rounds)
        totals.add(report)
        print(report.describe(), flush=True)


async def _upgrade(infra: Infra, release: Release, totals: Totals, seed: int) -> None:
    """The previous release's processes under the soak's load, upgraded to this one."""
    upgrade = RollingUpgrade()
    try:
        async with running_stack(infra, command=(str(release.rms),)) as stack:
            # no retention runs: ``rms retention run`` here is this release's, which need not
            # work on the previous release's schema before the migrations
            scenario = Scenario("soak-upgrade", [upgrade], seconds=10.0, gap=(3.0, 5.0),
                                at_least=1, mix=Mix(transactions=0.3, ordered=0.3, delayed=0.2))
            report = await run(stack, scenario, seed)
        totals.add(report)
        print(report.describe(), flush=True)
        print(f"upgrade: {upgrade.timelines[0].seconds:.1f}s from the migrations to the last "
              f"old process stopped; old processes SIGTERM did not end: "
              f"{upgrade.old_killed or 'none'}", flush=True)
        totals.errors += [f"upgrade: {killed}" for killed in upgrade.old_killed]
    except Exception:
        totals.errors.append(traceback.format_exc(limit=5))
        print(totals.errors[-1], flush=True)


async def soak(infras: Sequence[Infra], seconds: float, seed: int, plan: Plan = Plan(),
               upgrade: tuple[Infra, Release] | None = None) -> Totals:
    """The upgrade (with ``upgrade``: its infra and the previous release), then fresh stacks
    in turn on each infra (the cluster, then the single broker that loses its log),
    ``SINGLE_EVERY``-th stack on the single broker."""
    totals = Totals()
    deadline = time.monotonic() + seconds
    if upgrade is not None:
        await _upgrade(*upgrade, totals, seed)
    stacks = 0
    while time.monotonic() < deadline - 5:
        infra = infras[-1] if stacks % SINGLE_EVERY == SINGLE_EVERY - 1 else infras[0]
        stacks += 1
        try:
            async with running_stack(infra) as stack:
                await _rounds(stack, totals, deadline, seed, plan)
        except Exception:  # a harness or start-up failure: reported, then a fresh stack
            totals.errors.append(traceback.format_exc(limit=5))
            print(totals.errors[-1], flush=True)
    return totals


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.system.faults.soak", description=__doc__)
    parser.add_argument("--seconds", type=float,
                        default=float(os.environ.get("SOAK_SECONDS", "1800")))
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--base", type=Path, default=None,
                        help="folder for the database, broker and process logs (default: new "
                             "temporary folder, kept)")
    parser.add_argument("--failover", choices=["sync", "async"], default=None,
                        help="run on a PostgreSQL that fails over (Patroni), with synchronous "
                             "or asynchronous replication")
    parser.add_argument("--only", default="", help="comma-separated fault names to keep")
    args = parser.parse_args(argv)
    if args.failover and (reason := ha.missing()):
        print(f"soak: --failover cannot run: {reason}", file=sys.stderr)
        return 2
    plan = Plan(args.failover, frozenset(filter(None, args.only.split(","))))
    base = args.base or Path(tempfile.mkdtemp(prefix="rms-soak-"))
    stop_on_signals()  # the finally below then stops every server and process started
    die_with_parent()
    print(f"soak: {args.seconds:.0f}s, seed {args.seed}, logs in {base}", flush=True)
    try:
        totals = _soak_on_infras(args, plan, base)
    except ReleaseMissing as exc:
        print(f"soak: {exc}", file=sys.stderr)
        return 2
    except Stopped as stopped:
        print(f"soak: stopped by {stopped}; everything it started is stopped", file=sys.stderr)
        return 130
    command = (f"SOAK_SECONDS={args.seconds:.0f} python -m tests.system.faults.soak --seed {args.seed}"
               + (f" --failover {args.failover}" if args.failover else "")
               + (f" --only {args.only}" if args.only else ""))
    print(totals.render(command), flush=True)
    return 1 if totals.violations or totals.errors else 0


def _soak_on_infras(args: argparse.Namespace, plan: Plan, base: Path) -> Totals:
    """The soak on servers of its own under ``base``, every one stopped at its end, however it
    ends (each stop tried even when another fails)."""
    release = previous_release()
    infras = _infras(base, args.failover)
    upgrading = Infra(base / "upgrade", brokers=1, migrate=False)
    try:
        for infra in [*infras, upgrading]:
            infra.start()  # outside the event loop: migrations run their own
        previous_schema(upgrading, release)
        return asyncio.run(soak(infras, args.seconds, args.seed, plan, (upgrading, release)))
    finally:
        for infra in [*infras, upgrading]:
            try:
                infra.stop()
            except Exception as exc:  # one that never started, or a server gone already
                print(f"soak: stopping {infra.base.name}: {exc!r}", file=sys.stderr, flush=True)


def _infras(base: Path, failover: str | None) -> list[Infra]:
    """The cluster and the single broker that loses its log; with ``failover`` the cluster
    alone, on Patroni."""
    if failover:
        cluster = ha.PatroniCluster(base / "ha", synchronous=failover == "sync")
        return [Infra(base / "cluster", ha=cluster)]
    return [Infra(base / "cluster"), Infra(base / "single", brokers=1)]


if __name__ == "__main__":
    sys.exit(main())
