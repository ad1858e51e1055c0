"""``rms bench`` (``make bench``): the benchmark of every path, printed as a table and written
as JSON, with the conditions, and a verification that fails the command (exit 1) when any
confirmed message did not reach ``done`` or any cancelled one was published.

Default: all paths; closed loop at 1 and 32 clients and open loop at 1,500 tx/s for 10 s each,
on the bench's own stack. See bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from history.options import duty_cycle, positive_int

PATHS = ("happy", "bare", "oneshot", "bulk", "transaction", "checkback", "redelivery",
         "delayed", "ordered", "overload", "tenants", "fanout")
# only when asked: it seeds millions of rows into the bench's database, and runs last
EXTRA_PATHS = ("full",)
TRANSACTION_MESSAGES = 3  # messages per transaction of the transaction path
FANOUT_CONSUMERS = 3  # consumer apps of the fan-out path's topic
RESULTS = Path(__file__).resolve().parent / "results"


def configure(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--paths", nargs="+", choices=PATHS + EXTRA_PATHS, default=list(PATHS),
        help="paths to measure (default all but 'full'; 'bare' is the baseline)")
    add("--duration", type=float, default=10.0, help="seconds per load run (default 10)")
    add("--transactions", type=int, default=None,
        help="transactions per load run instead of --duration")
    add("--concurrency", type=int, nargs="*", default=[1, 32],
        help="closed-loop clients, one run per value (default 1 32)")
    add("--rate", type=float, nargs="*", default=[1500.0],
        help="open-loop arrival rates in tx/s, one run per value (default 1500)")
    add("--api-workers", type=int, default=1, help="uvicorn workers of rms serve and bare (default 1)")
    add("--pin-serve", action="store_true",
        help="run the measured servers (rms serve, the bare server) on the lowest CPU and "
             "everything else (PostgreSQL, Kafka, load generators, workers) on the others "
             "(Linux; an own stack only)")
    add("--confirm-answer", choices=("published", "committed"), default="published",
        help="RMS_CONFIRM_ANSWER of the rms serve the benchmark starts: a confirm answers "
             "after the broker's answer is recorded (published, the default) or once the "
             "confirm is durable (committed)")
    add("--ordered-keys", type=int, nargs="+", default=[4, 10_000],
        help="distinct keys of the ordered path, one run per value (default 4 10000)")
    add("--bulk-batch", type=int, default=500, help="messages per bulk request (default 500)")
    add("--bulk-concurrency", type=int, default=4, help="bulk clients (default 4)")
    add("--checkback-messages", type=int, default=20_000,
        help="messages of the check-back run (default 20000)")
    add("--redelivery-messages", type=int, default=50_000,
        help="messages of the redelivery run (default 50000)")
    add("--confirm-workers", type=int, nargs="+", default=[1],
        help="confirm-worker processes, one check-back run per value (default 1)")
    add("--recovery-workers", type=int, nargs="+", default=[1],
        help="recovery-worker processes, one redelivery run per value (default 1)")
    add("--worker-batch", type=int, default=1000, help="RMS_WORKER_BATCH_SIZE of the workers")
    add("--worker-concurrency", type=int, default=256,
        help="RMS_WORKER_CONCURRENCY of the workers")
    add("--worker-timeout", type=float, default=600.0,
        help="seconds the worker paths wait for resolution (the rest count as errors)")
    add("--overload-seconds", type=float, default=30.0,
        help="seconds of the overload path's overload phase (default 30)")
    add("--overload-calm", type=float, default=10.0,
        help="seconds of its calm phases before and after, at half the capacity (default 10)")
    add("--overload-factor", type=float, default=2.0,
        help="the overload's arrival rate, in capacities (default 2)")
    add("--tenants-rate", type=float, default=100.0,
        help="the two-tenant path's calm load, transactions per second (default 100)")
    add("--tenants-seconds", type=float, default=20.0,
        help="seconds of the calm load alone and again beside the flood (default 20)")
    add("--seed-messages", type=positive_int, default=5_000_000,
        help="the full path: done messages seeded before its second half (default 5000000)")
    add("--retention-duty-cycle", type=duty_cycle, default=None,
        help="the full path: rms retention run --duty-cycle (default: its own default pace)")
    add("--soak", type=float, default=0.0, metavar="SECONDS",
        help="after the paths, sample rms serve RSS for this long under load (default off)")
    add("--soak-rate", type=float, default=1000.0, help="open-loop rate of the soak")
    add("--target", help="URL of an existing RMS instead of starting one")
    add("--database-url", help="with --target: its database (read; the worker gates write)")
    add("--kafka", help="with --target: its bootstrap servers")
    add("--admin-token", help="with --target: its admin token (to register the bench app)")
    add("--ack-topic", default="rms.acks", help="with --target: its RMS_ACK_TOPIC")
    add("--out", type=Path, default=None,
        help="JSON file (default bench/results/bench-<time>.json)")


def _label(text: str) -> str:
    return "".join(c for c in text if c.isalnum())


def _load_runs(args: argparse.Namespace) -> Iterator[Any]:
    from bench.paths import Load

    common = {"transactions": args.transactions, "duration": args.duration}
    for concurrency in args.concurrency:
        for path in ("happy", "bare"):
            yield Load(path, "closed", concurrency=concurrency, **common)
    for rate in args.rate:
        for path in ("happy", "bare"):
            yield Load(path, "open", rate=rate, **common)
    for concurrency in args.concurrency[-1:]:
        yield Load("oneshot", "closed", concurrency=concurrency, **common)
    for rate in args.rate:
        yield Load("oneshot", "open", rate=rate, **common)
    for concurrency in args.concurrency[-1:]:
        for keys in args.ordered_keys:
            yield Load("ordered", "closed", concurrency=concurrency, keys=keys, **common)
    bulk = {"transactions": -(-args.transactions // args.bulk_batch) if args.transactions
            else None, "duration": args.duration}
    yield Load("bulk", "closed", concurrency=args.bulk_concurrency,
               batch_size=args.bulk_batch, **bulk)
    for concurrency in args.concurrency[-1:]:
        yield Load("transaction", "closed", concurrency=concurrency,
                   batch_size=TRANSACTION_MESSAGES, **common)
    yield from _fanout_runs(args.concurrency, common)


def _fanout_runs(concurrencies: list[int], common: dict[str, Any]) -> Iterator[Any]:
    """The fan-out path at each closed-loop concurrency of the happy path (compared there)."""
    from bench.paths import Load

    for concurrency in concurrencies:
        yield Load("fanout", "closed", concurrency=concurrency, consumers=FANOUT_CONSUMERS,
                   **common)


def _worker_runs(args: argparse.Namespace) -> Iterator[Any]:
    from bench.workerpaths import WorkerLoad

    common = {"batch_size": args.worker_batch, "concurrency": args.worker_concurrency,
              "timeout": args.worker_timeout}
    for workers in args.confirm_workers:
        yield WorkerLoad("checkback", args.checkback_messages, workers, **common)
    for workers in args.recovery_workers:
        yield WorkerLoad("redelivery", args.redelivery_messages, workers, **common)
    for workers in args.recovery_workers:
        yield WorkerLoad("delayed", args.redelivery_messages, workers, **common)


def _measure(stack: Any, args: argparse.Namespace, stamp: str,
             progress: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    from bench import baseline
    from bench.fanout import run_fanout
    from bench.paths import run_load, warm_up
    from bench.workerpaths import run_worker_path

    runs = []
    bare_url = baseline.start(stack, args.api_workers) if "bare" in args.paths else ""
    for url in filter(None, (stack.api_url, bare_url)):
        warm_up(stack, url, f"{stamp}-warm{'bare' if url == bare_url else ''}")
    for load in _load_runs(args):
        if load.path in args.paths:
            url = bare_url if load.path == "bare" else stack.api_url
            run_id = f"{stamp}-{load.path}-{_label(load.label)}"
            runs.append(run_fanout(stack, load, run_id) if load.path == "fanout"
                        else run_load(stack, load, url, run_id))
            progress(runs[-1])
    for row in _open_loop_runs(stack, args, stamp):
        runs.append(row)
        progress(row)
    for work in _worker_runs(args):
        if work.path in args.paths:
            runs.append(run_worker_path(stack, work, f"{stamp}-{work.path}-w{work.workers}"))
            progress(runs[-1])
    if "full" in args.paths:
        from bench.fullpath import run_full

        for row in run_full(stack, _full_load(args), f"{stamp}-full"):
            runs.append(row)
            progress(row)
    return runs


def _open_loop_runs(stack: Any, args: argparse.Namespace,
                    stamp: str) -> Iterator[dict[str, Any]]:
    """The runs of the paths on a second ``rms serve`` of their own: overload and tenants."""
    if "overload" in args.paths:
        from bench.overload import run_overload

        yield from run_overload(stack, args.concurrency[-1], args.overload_seconds,
                                args.overload_calm, args.overload_factor, args.duration,
                                args.api_workers, f"{stamp}-overload")
    if "tenants" in args.paths:
        from bench.tenants import run_tenants

        yield from run_tenants(stack, args.tenants_rate, args.tenants_seconds, args.api_workers,
                               f"{stamp}-tenants")


def _full_load(args: argparse.Namespace) -> Any:
    from bench.fullpath import FullLoad
    from bench.workerpaths import WorkerLoad

    common = {"batch_size": args.worker_batch, "concurrency": args.worker_concurrency,
              "timeout": args.worker_timeout}
    return FullLoad(args.concurrency[-1], args.duration, args.transactions,
                    WorkerLoad("checkback", args.checkback_messages, 1, **common),
                    WorkerLoad("redelivery", args.redelivery_messages, 1, **common),
                    args.seed_messages, args.retention_duty_cycle)


def _progress(run: dict[str, Any]) -> None:
    state = "ok" if run["verification"]["passed"] else "VERIFICATION FAILED"
    print(f"  {run['path']} {run['load']}: {run['throughput']:,.0f} {run['unit']}, "
          f"{run['errors']} errors, {state}", flush=True)


def _bench(args: argparse.Namespace, stamp: str) -> dict[str, Any]:
    from bench import conditions, report
    from bench import stack as stacks
    from bench.procs import Sampler
    from bench.soak import run_soak

    load_average = [round(x, 2) for x in os.getloadavg()]
    sampler = Sampler()
    sampler.add("bench", os.getpid(), descendants=False)  # the sampler and the polling
    sampler.start()
    print(f"rms bench: {'using ' + args.target if args.target else 'starting the stack'} ...",
          flush=True)
    stack = (stacks.target_stack if args.target else stacks.own_stack)(args, sampler)
    try:
        stacks.register_app(stack)
        stacks.start_helpers(stack)
        found = conditions.collect(stack.dsn, stack.bootstrap, stack.own, args.api_workers)
        found["load_average_at_start"] = load_average
        found["confirm_answer"] = args.confirm_answer if stack.own else "the target's"
        found["serve_cpus"] = sorted(stack.serve_cpus) if stack.serve_cpus else None
        print(f"rms bench: measuring (work dir {stack.work}) ...", flush=True)
        runs = _measure(stack, args, stamp, _progress)
        if stack.serve_cpus:  # as the processes ran: the last run's servers still live
            found["affinity"] = stacks.affinities(stack)
        soak = None
        if args.soak > 0:
            soak, row = run_soak(stack, args.soak, args.soak_rate, f"{stamp}-soak")
            runs.append(row)
        report.add_ratios(runs)
        return {"conditions": found, "runs": runs, "soak": soak, "work_dir": str(stack.work),
                "options": {k: str(v) for k, v in vars(args).items()}}
    finally:
        stack.stop()
        sampler.stop()


def run(args: argparse.Namespace) -> int:
    from bench import report
    from bench.stack import StackError
    from rms.devstack.reaper import Stopped, die_with_parent, stop_on_signals

    started = datetime.now(UTC)
    stamp = f"b{uuid.uuid4().hex[:6]}"
    clock = time.monotonic()
    stop_on_signals()  # SIGINT, SIGTERM, SIGHUP and the parent's death stop the whole stack
    die_with_parent()
    try:
        result = _bench(args, stamp)
    except Stopped as stopped:
        print(f"rms bench: stopped by {stopped}", file=sys.stderr)
        return 130
    except (StackError, RuntimeError) as exc:
        print(f"rms bench: {exc}", file=sys.stderr)
        return 2
    result["started"] = started.isoformat()
    result["wall_seconds"] = round(time.monotonic() - clock, 1)
    out = args.out or RESULTS / f"bench-{started.strftime('%Y%m%dT%H%M%SZ')}.json"
    report.write_json(result, out)
    print()
    print(report.render(result))
    print(f"\nJSON: {out} (wall time {result['wall_seconds']:.0f} s)")
    failed = [r for r in result["runs"] if not r["verification"]["passed"]]
    if failed:
        print(f"rms bench: VERIFICATION FAILED in {len(failed)} run(s)", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cli", description=__doc__)
    configure(parser)
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
