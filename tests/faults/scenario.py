"""One scenario: concurrent load, faults every few seconds, heal, wait for liveness (bounded),
then the checker over the recorded history and the database's final state."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from tests.faults.checker import Violation, check, notes
from tests.faults.cluster import DATABASE, SETTINGS, Stack
from tests.faults.faults import Fault, FaultContext, heal
from tests.faults.history import OPEN, Final, History
from tests.faults.load import PLANS, Consumer, Load, Mix, check_back
from tests.faults.proxy import Toxics
from tests.faults.retention import Retention, read_archive

LIVENESS_SECONDS = 90.0  # after healing: retry budgets (check-backs, deliveries) fit in it


@dataclass
class Scenario:
    name: str
    faults: Sequence[Fault]
    seconds: float = 12.0
    clients: int = 6
    gap: tuple[float, float] = (1.0, 2.5)  # seconds between two injections
    plans: dict[str, int] = field(default_factory=lambda: dict(PLANS))
    mix: Mix = field(default_factory=Mix)  # transactions, ordered and delayed messages
    retention: bool = False  # retention runs (some killed) during the load, one at the end
    # latency kept during the load, by proxy ("pg", "kafka", "callback"): claims are held
    # longer, so worker faults catch workers holding them
    background: dict[str, Toxics] = field(default_factory=dict)


@dataclass
class Report:
    name: str
    ops: Counter[str]
    faults: Counter[str]
    violations: list[Violation]
    messages: int
    states: Counter[str]
    stale_writes: int
    heal_seconds: float
    open_check_outcomes: Counter[str]  # how transactions ended that check-back found open
    unanswered: Counter[str]  # requests that got no answer, by kind
    server_errors: Counter[str]  # 500 answers by kind (an outage must answer 503)
    notes: list[str] = field(default_factory=list)  # reported, not violations (held keys)

    def describe(self, limit: int = 25) -> str:
        lines = [f"scenario {self.name}: {self.messages} messages {dict(self.states)}",
                 f"  operations {dict(self.ops)}; unanswered {dict(self.unanswered)}; "
                 f"500 answers {dict(self.server_errors)}",
                 f"  faults {dict(self.faults)}",
                 f"  check answers that found the claim lost or the message changed (stale, "
                 f"written as history only): {self.stale_writes}; settled "
                 f"{self.heal_seconds:.1f}s after healing",
                 f"  violations {len(self.violations)}"]
        lines += [f"    {v}" for v in self.violations[:limit]]
        lines += [f"  note: {n}" for n in self.notes[:limit]]
        return "\n".join(lines)


async def inject_until(ctx: FaultContext, faults: Sequence[Fault], stop_at: float,
                       gap: tuple[float, float]) -> None:
    if not faults:
        await asyncio.sleep(max(0.0, stop_at - time.monotonic()))
        return
    while True:
        await asyncio.sleep(ctx.rng.uniform(*gap))
        if time.monotonic() >= stop_at:
            return
        await ctx.rng.choice(list(faults)).inject(ctx)


async def settle(stack: Stack, apps: list[str], timeout: float) -> float:
    """Wait until every message of ``apps`` is settled (or ``timeout``); returns the wait."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if not await stack.unsettled(apps):
            break
        await asyncio.sleep(0.25)
    return time.monotonic() - started


async def run(stack: Stack, scenario: Scenario, seed: int) -> Report:
    rng = random.Random(seed)
    apps = await stack.create_apps(uuid.uuid4().hex[:8])
    history = History(consumers={apps.consumer})
    stack.callbacks.behaviour = check_back(history)
    consumer = Consumer(stack, apps, history, random.Random(rng.random()),
                        SETTINGS["RMS_ACK_TOPIC"])
    load = Load(stack, apps, history, random.Random(rng.random()), scenario.clients,
                plans=scenario.plans, mix=scenario.mix)
    retention = Retention(stack, history, random.Random(rng.random()),
                          stack.infra.database_url(DATABASE))
    ctx = FaultContext(stack, load, consumer, rng, Counter())
    for name, toxics in scenario.background.items():
        stack.proxies[name].toxics = toxics
    consumer.start()
    load.start(scenario.seconds)
    retaining = asyncio.create_task(retention.loop(load.stop_at) if scenario.retention
                                    else asyncio.sleep(0))
    try:
        await inject_until(ctx, scenario.faults, load.stop_at, scenario.gap)
    finally:
        await heal(ctx)
    await load.finish()
    await retaining
    waited = await settle(stack, apps.names, LIVENESS_SECONDS)
    # no ack may be sent or answered after the snapshot: an answer the snapshot cannot reflect
    # would read as a lost write
    await consumer.stop()
    if scenario.retention:
        await asyncio.sleep(2.5)  # past OLDER_THAN: the last finished messages go too
        await retention.finish()
    final = await _final(stack, apps.names, scenario.retention)
    merged = final.merged()
    return Report(scenario.name, history.counts(), ctx.injected + _proxy_faults(stack),
                  check(history, final), len(merged.messages),
                  Counter(m.state + ("/dead" if m.dead else "") + ("/archived" if m.archived
                                                                  else "")
                          for m in merged.messages.values()),
                  sum(1 for e in merged.events if e.detail.get("stale")), waited,
                  _open_outcomes(history),
                  Counter(op.kind for op in history.ops if op.status is None
                          and op.kind != "ack-topic"),
                  Counter(op.kind for op in history.ops if op.status == 500),
                  notes(history, final))


async def _final(stack: Stack, apps: list[str], archived: bool) -> Final:
    final = Final(await stack.final_messages(apps), await stack.final_events(apps))
    if archived:
        final.archived, final.archived_events = await asyncio.to_thread(
            read_archive, stack.infra.base / "archive", apps)
    return final


def _open_outcomes(history: History) -> Counter[str]:
    found_open = {a.message_id for a in history.answers if a.status == OPEN}
    return Counter(history.truth[m] for m in found_open)


def _proxy_faults(stack: Stack) -> Counter[str]:
    found: Counter[str] = Counter()
    for label, proxy in stack.proxies.items():
        for kind, n in proxy.injected.items():
            found[f"{label}-proxy-{kind}"] += n
        proxy.injected.clear()
    return found
