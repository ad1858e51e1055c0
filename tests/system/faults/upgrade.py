"""A rolling upgrade from the previous release, as the operations guide says to do it, as a
fault of the suite: the new release's migrations run (``rms migrate``) while the previous
release's processes serve the load; those run alone on the new schema for a while (the rule
"a release's migrations keep the previous release's code working"); then each new process
starts beside its old one and, once it is ready, the old one stops with SIGTERM. The load goes
on throughout."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field

from rms.devstack.embedded import free_port
from tests.system.faults.cluster import DATABASE, STOP_SECONDS, THIS_RELEASE, Infra, RmsProcess, Stack
from tests.system.faults.faults import FaultContext
from tests.system.faults.history import History
from tests.system.faults.release import Release

MIGRATE_SECONDS = 120.0
OVERLAP_SECONDS = 2.0  # the new API answers beside the old one before the old one goes
STEP_SECONDS = 60.0
LOAD_AFTER_SECONDS = 3.0  # the load goes on at least this long after the last old process


class UpgradeFailed(AssertionError):
    """A step of the upgrade went wrong (a migration failed, an old process would not stop)."""


async def migrate(command: tuple[str, ...], env: dict[str, str]) -> None:
    """``rms migrate`` of the release ``command`` starts, against ``RMS_DATABASE_URL``."""
    process = await asyncio.create_subprocess_exec(
        *command, "migrate", env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    output, _ = await asyncio.wait_for(process.communicate(), MIGRATE_SECONDS)
    if process.returncode != 0:
        raise UpgradeFailed(f"{' '.join(command)} migrate exited {process.returncode}:\n"
                            f"{output.decode(errors='replace')[-3000:]}")


def previous_schema(infra: Infra, release: Release) -> None:
    """The infra's empty database migrated by the previous release (``infra.migrate`` False)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")}
    env["RMS_DATABASE_URL"] = infra.database_url(DATABASE)
    done = subprocess.run([str(release.rms), "migrate"], env=env, capture_output=True,
                          text=True, timeout=MIGRATE_SECONDS, check=False)
    if done.returncode != 0:
        raise UpgradeFailed(f"the previous release's migrate exited {done.returncode}:\n"
                            f"{done.stdout[-2000:]}{done.stderr[-2000:]}")


@dataclass
class Timeline:
    """When the upgrade's steps happened (monotonic seconds)."""

    started: float = 0.0
    migrated: float = 0.0  # the new migrations committed; the old processes run on them alone
    first_new: float = 0.0  # the first new process started
    finished: float = 0.0  # the last old process gone
    # what the previous release alone did on the new schema (between ``migrated`` and
    # ``first_new``): requests answered 2xx by kind, records read
    alone: Counter[str] = field(default_factory=Counter)

    @property
    def seconds(self) -> float:
        return self.finished - self.started


def _served(history: History, start: float, end: float) -> Counter[str]:
    done = Counter(op.kind for op in history.ops
                   if op.ok and op.answered is not None and start <= op.answered <= end)
    done["kafka-record"] = sum(1 for r in history.consumed if start <= r.at <= end)
    return done


@dataclass
class RollingUpgrade:
    """Every process of the stack that does not run ``command`` replaced by one that does."""

    command: tuple[str, ...] = THIS_RELEASE
    alone_seconds: float = 3.0  # the old processes alone on the new schema, under load
    name: str = "rolling-upgrade"
    bound: float = 300.0
    timelines: list[Timeline] = field(default_factory=list)
    old_killed: list[str] = field(default_factory=list)  # old processes SIGTERM did not end

    async def inject(self, ctx: FaultContext) -> None:
        stack = ctx.stack
        old = [p for p in stack.processes if p.command != self.command]
        if not old:
            return
        timeline = Timeline(started=time.monotonic())
        planned = ctx.load.stop_at
        self._keep_loading(ctx)
        await migrate(self.command, stack.serve.env)
        timeline.migrated = time.monotonic()
        ctx.injected["migrations-under-load"] += 1
        await asyncio.sleep(self.alone_seconds)
        timeline.first_new = time.monotonic()
        timeline.alone = _served(ctx.load.history, timeline.migrated, timeline.first_new)
        for process in old:
            self._keep_loading(ctx)
            await self._replace(stack, process)
        timeline.finished = time.monotonic()
        ctx.load.stop_at = max(planned, timeline.finished + LOAD_AFTER_SECONDS)
        self.timelines.append(timeline)
        ctx.injected[self.name] += 1

    def _keep_loading(self, ctx: FaultContext) -> None:
        """The load may not end in the middle of a step (a step takes seconds, not a minute)."""
        ctx.load.stop_at = max(ctx.load.stop_at, time.monotonic() + STEP_SECONDS)

    async def _replace(self, stack: Stack, old: RmsProcess) -> None:
        new = self._successor(stack, old)
        new.start()
        await new.wait_ready(stack.http)
        if old is stack.serve:
            stack.beside.append(new)  # both answer, as behind a load balancer
            await asyncio.sleep(OVERLAP_SECONDS)
            stack.beside.remove(new)  # the old one leaves the rotation, then is stopped
            stack.serve = new
        else:
            stack.workers[stack.workers.index(old)] = new
        stack.retiring.append(old)  # stopped with the stack if this step is cut short
        old.terminate()
        await old.stop(time.monotonic() + STOP_SECONDS)
        stack.retiring.remove(old)
        assert old.process is not None
        if old.process.returncode == -signal.SIGKILL:  # (uvicorn ends by its SIGTERM, -15)
            self.old_killed.append(f"{old.name} did not stop within {STOP_SECONDS:.0f}s")

    def _successor(self, stack: Stack, old: RmsProcess) -> RmsProcess:
        port = free_port() if old.port is not None else None
        args = ["serve", "--port", str(port)] if port is not None else list(old.args)
        return RmsProcess(f"{old.name}-upgraded", args, old.env,
                          stack.base / f"{old.name}-upgraded.log", port, self.command)
