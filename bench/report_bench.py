"""Benchmark of the SLA report against its plain baseline, on synthetic histories of 1, 2 and
5 million messages (``bench.history_gen``, generated once per size and reused).

    python -m bench.report_bench --sizes 1,2,5 --workdir /tmp/rms-bench

Per size, two runs, each its own process with the same Spark settings (``--master``,
default ``local[2]``; ``--driver-memory``, default Spark's own; ``--conf``): the plain
baseline (``bench.report_baseline``: the report's core aggregation as a plain PySpark
script) and the report (``python -m spark.job`` over the history's Parquet export). Per run:

- wall time, from process start to exit;
- CPU seconds and peak RSS of its whole process tree (Python driver and JVM), sampled every
  0.2 s (``bench.procs``: private memory plus the largest shared part once);
- the JVM heap, from its GC log: the most it held before a collection, the most that
  survived one (the live data), and its size;
- the machine during the run: CPU used by processes outside the benchmark (in cores) and the
  1-minute load average. A run with more than 0.15 cores used elsewhere is marked BUSY: its
  figures are not figures; take them again on a quiet machine.

The report's ``hourly.parquet`` is checked against the baseline's figures (messages,
prepared, sent, done, actors, check-backs, deliveries, and the created -> done count and
percentiles), and its ``consumers.parquet`` against the baseline's per-consumer rows (acked,
publish -> ack count and percentiles): a mismatch prints VERIFICATION FAILED and the exit
code is 1. Results are
printed and written to ``bench/results/report_bench-<time>.json``. Not a test: run it by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

from bench.history_gen import generate
from bench.procs import MachineLoad, Sampler

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
GC_LINE = re.compile(r"(\d+)([KMG])->(\d+)([KMG])\((\d+)([KMG])\)")
UNIT_MB = {"K": 1 / 1024, "M": 1.0, "G": 1024.0}
RATIO_TARGET = 1.3  # report time / baseline time, at every size
LINEAR_TARGET = 5.5  # 5 M messages take at most this many times the 1 M time


@dataclass
class Heap:
    peak_mb: float  # the most the heap held (before a collection)
    live_mb: float  # the most that survived a collection
    size_mb: float  # the heap's largest committed size


@dataclass
class Run:
    kind: str  # baseline or report
    seconds: float
    cpu_seconds: float
    peak_rss_mb: float
    heap: Heap | None
    machine: dict[str, float | bool]
    exit_code: int


@dataclass
class Size:
    millions: float
    messages: int
    events: int
    generate_seconds: float | None
    baseline: Run
    report: Run
    verified: bool
    problems: list[str]

    @property
    def ratio(self) -> float:
        return self.report.seconds / self.baseline.seconds

    @property
    def busy(self) -> bool:
        return bool(self.baseline.machine["busy"] or self.report.machine["busy"])


def _history(workdir: Path, millions: float, regenerate: bool) -> tuple[Path, int, float | None]:
    directory = workdir / f"history-{millions:g}m"
    manifest = directory / "_export.json"
    if regenerate or not manifest.exists():
        shutil.rmtree(directory, ignore_errors=True)
        started = time.perf_counter()
        generate(directory, round(millions * 1_000_000))
        took: float | None = time.perf_counter() - started
    else:
        took = None
    events = json.loads(manifest.read_text())["tables"]["events"]["rows"]
    return directory, int(events), took


def gc_heap(log: Path) -> Heap | None:
    """Heap figures from a ``-Xlog:gc`` file (lines ``... 512M->128M(1024M) ...``)."""
    if not log.is_file():
        return None
    before = after = size = 0.0
    for match in GC_LINE.finditer(log.read_text(errors="replace")):
        values = [float(match.group(i)) * UNIT_MB[match.group(i + 1)] for i in (1, 3, 5)]
        before, after, size = max(before, values[0]), max(after, values[1]), max(size, values[2])
    return Heap(round(before), round(after), round(size)) if size else None


JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def _spark_args(args: argparse.Namespace, gc_log: Path) -> list[str]:
    """The Spark settings of both runs; the GC log joins any driver Java options given."""
    extra = ["--master", args.master]
    if args.driver_memory:
        extra += ["--driver-memory", args.driver_memory]
    conf = dict(pair.split("=", 1) for pair in args.conf)
    conf[JAVA_OPTIONS] = f"{conf.get(JAVA_OPTIONS, '')} -Xlog:gc:file={gc_log}".strip()
    for key, value in {"spark.ui.enabled": "false", **conf}.items():
        extra += ["--conf", f"{key}={value}"]
    return extra


def _measure(kind: str, command: list[str], gc_log: Path) -> Run:
    """Runs ``command`` while sampling its process tree and the machine."""
    gc_log.unlink(missing_ok=True)
    sampler = Sampler(interval=0.2)
    sampler.add("bench", os.getpid(), descendants=False)  # the sampler itself
    sampler.start()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    try:
        sampler.open_window()
        started = time.perf_counter()
        process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
        sampler.add(kind, process.pid)
        _, stderr = process.communicate()
        took = time.perf_counter() - started
        usage = sampler.close_window()
    finally:
        sampler.stop()
    if process.returncode != 0:
        print(stderr.decode(errors="replace")[-3000:], file=sys.stderr)
    mine = usage.get(kind)
    machine = sampler.machine or MachineLoad(0.0, 0.0, 0.0, 0.0)
    return Run(kind, round(took, 1), mine.cpu_seconds if mine else 0.0,
               mine.peak_rss_mb if mine else 0.0, gc_heap(gc_log), machine.as_dict(),
               process.returncode)


def _baseline(history: Path, out: Path, args: argparse.Namespace) -> Run:
    gc_log = args.workdir / "gc-baseline.log"
    command = [sys.executable, "-m", "bench.report_baseline", "--input", str(history),
               "--out", str(out), *_spark_args(args, gc_log)]
    return _measure("baseline", command, gc_log)


def _report(history: Path, out: Path, args: argparse.Namespace) -> Run:
    shutil.rmtree(out, ignore_errors=True)
    gc_log = args.workdir / "gc-report.log"
    command = [sys.executable, "-m", "spark.job", "--input", str(history), "--out", str(out),
               *_spark_args(args, gc_log)]
    return _measure("report", command, gc_log)


# report hourly column -> baseline field
VERIFIED = {
    "messages": "messages", "prepared": "prepared", "sent": "sent", "done": "done",
    "confirmed_by_producer": "confirmed_by_producer",
    "confirmed_by_check_back": "confirmed_by_check-back",
    "cancelled_by_producer": "cancelled_by_producer",
    "rolled_back_by_check_back": "cancelled_by_check-back", "checkbacks": "checks",
    "checkbacks_committed": "checks_committed", "checkbacks_rolled_back": "checks_rolled_back",
    "checkbacks_unknown": "checks_unknown", "deliveries": "publishes",
    "publish_failures": "publish_failures", "resends": "resends",
    "prepare_to_done_count": "created_to_done_count",
}


def verify(report_dir: Path, baseline_json: Path) -> list[str]:
    """Differences between the report's hourly and per-consumer tables and the baseline's
    rows."""
    outputs = [report_dir / name for name in ("hourly.parquet", "consumers.parquet")]
    if not baseline_json.is_file() or not all(path.is_file() for path in outputs):
        return ["a run wrote no output"]
    baseline = json.loads(baseline_json.read_text())
    return (_verify_hourly(report_dir, baseline["hourly"])
            + _verify_consumers(report_dir, baseline["consumers"]))


def _verify_consumers(report_dir: Path, baseline: list[dict[str, Any]]) -> list[str]:
    import pyarrow.parquet as pq

    expected = {(r["app"], r["topic"], r["consumer"]): r for r in baseline}
    rows = pq.read_table(report_dir / "consumers.parquet").to_pylist()
    problems = [] if len(rows) == len(expected) else [
        f"{len(rows)} report consumer rows, {len(expected)} baseline rows"]
    for row in rows:
        key = (row["app"], row["topic"], row["consumer"])
        base = expected.get(key, {})
        wanted = {"acked": base.get("acked"),
                  "publish_to_ack_count": base.get("publish_to_ack_count")}
        wanted |= dict(zip(("publish_to_ack_p50", "publish_to_ack_p95", "publish_to_ack_p99"),
                           base.get("publish_to_ack") or [None] * 3, strict=True))
        problems += [f"{key} {c}: report {row[c]}, baseline {v}" for c, v in wanted.items()
                     if row[c] != v]
    return problems


def _verify_hourly(report_dir: Path, baseline: list[dict[str, Any]]) -> list[str]:
    import pyarrow.parquet as pq

    expected = {(r["app"], r["topic"], r["hour"]): r for r in baseline}
    problems = []
    rows = pq.read_table(report_dir / "hourly.parquet").to_pylist()
    if len(rows) != len(expected):
        problems.append(f"{len(rows)} report rows, {len(expected)} baseline rows")
    for row in rows:
        key = (row["app"], row["topic"], row["hour"].isoformat())
        base = expected.get(key)
        if base is None:
            problems.append(f"{key}: not in the baseline")
            continue
        wanted = {column: base[field] for column, field in VERIFIED.items()}
        wanted |= dict(zip(("prepare_to_done_p50", "prepare_to_done_p95", "prepare_to_done_p99"),
                           base["created_to_done"] or [None] * 3, strict=True))
        problems += [f"{key} {c}: report {row[c]}, baseline {v}" for c, v in wanted.items()
                     if row[c] != v]
    return problems


def bench_size(args: argparse.Namespace, millions: float) -> Size:
    history, events, generated = _history(args.workdir, millions, args.regenerate)
    baseline_json = args.workdir / "baseline.json"
    baseline_json.unlink(missing_ok=True)
    baseline = _baseline(history, baseline_json, args)
    report = _report(history, args.workdir / "report", args)
    problems = verify(args.workdir / "report", baseline_json)
    return Size(millions, round(millions * 1_000_000), events, generated, baseline, report,
                not problems, problems)


def _heap(run: Run) -> str:
    heap = run.heap
    return "-" if heap is None else f"{heap.peak_mb:.0f}/{heap.live_mb:.0f}/{heap.size_mb:.0f}"


HEADER = (f"{'size':>7} {'messages':>10} {'events':>11}  {'baseline':>8} {'report':>8} "
          f"{'ratio':>5} {'report':>8}  {'CPU s':>11} {'peak RSS MB':>11}  "
          f"{'heap MB':>14} {'heap MB':>14}\n"
          f"{'':>7} {'':>10} {'':>11}  {'s':>8} {'s':>8} {'':>5} {'s / M':>8}  "
          f"{'base/report':>11} {'base/report':>11}  {'baseline':>14} {'report':>14}")


def _row(size: Size) -> str:
    base, report = size.baseline, size.report
    flags = ("" if size.verified else "  VERIFICATION FAILED") + ("  BUSY" if size.busy else "")
    codes = "" if base.exit_code == report.exit_code == 0 else (
        f"  exit {base.exit_code}/{report.exit_code}")
    return (f"{size.millions:>5g} M {size.messages:>10,} {size.events:>11,}  "
            f"{base.seconds:>8.1f} {report.seconds:>8.1f} {size.ratio:>5.2f} "
            f"{report.seconds / size.millions:>8.1f}  "
            f"{f'{base.cpu_seconds:.0f}/{report.cpu_seconds:.0f}':>11} "
            f"{f'{base.peak_rss_mb:.0f}/{report.peak_rss_mb:.0f}':>11}  "
            f"{_heap(base):>14} {_heap(report):>14}{codes}{flags}")


def _machine(sizes: list[Size]) -> list[str]:
    lines = ["", "the machine during each run (CPU used outside the benchmark, in cores; 1-minute "
                 "load average at start / max / end):"]
    for size in sizes:
        for run in (size.baseline, size.report):
            m = run.machine
            lines.append(f"  {size.millions:>5g} M {run.kind:<8} other {m['other_cores']:.2f} "
                         f"cores, load {m['load_1min_open']:.2f} / {m['load_1min_max']:.2f} / "
                         f"{m['load_1min_close']:.2f}  "
                         f"{'BUSY: not a figure' if m['busy'] else 'quiet'}")
    if any(size.busy for size in sizes):
        lines.append("  a BUSY run shared the machine with other work: take it again on a quiet "
                     "machine")
    return lines


def _targets(sizes: list[Size], driver_memory: str) -> list[str]:
    marks = {True: "met", False: "NOT MET", None: "-"}
    judged: list[tuple[str, str, bool | None]] = []
    for size in sizes:
        judged.append((f"{size.millions:g} M: report <= {RATIO_TARGET} x baseline",
                       f"{size.ratio:.2f}" + (" (BUSY)" if size.busy else ""),
                       None if size.busy else size.ratio <= RATIO_TARGET))
    by_size = {size.millions: size for size in sizes}
    if 1 in by_size and 5 in by_size:
        one, five = by_size[1], by_size[5]
        growth = five.report.seconds / one.report.seconds
        judged.append((f"5 M report <= {LINEAR_TARGET} x the 1 M report", f"{growth:.2f}",
                       None if one.busy or five.busy else growth <= LINEAR_TARGET))
    for size in sizes:
        judged.append((f"{size.millions:g} M completes with driver memory {driver_memory}",
                       f"exit {size.report.exit_code}", size.report.exit_code == 0))
    lines = ["", "targets (a BUSY run judges no time):"]
    return lines + [f"  {marks[met]:<8} {name}: {figure}" for name, figure, met in judged]


def _conditions(environment: dict[str, Any]) -> str:
    e = environment
    return (f"conditions: {e['cores']} cores, {e['memory_gib']} GiB, Python {e['python']}, "
            f"pyspark {e['pyspark']}, {e['java']}; master {e['master']}, driver memory "
            f"{e['driver_memory']}, conf {e['conf'] or 'none'}; git {e['git']}")


def render(sizes: list[Size], environment: dict[str, Any]) -> str:
    lines = [_conditions(environment), "", HEADER, "-" * len(HEADER.splitlines()[0])]
    lines += [_row(size) for size in sizes]
    lines += _machine(sizes) + _targets(sizes, str(environment["driver_memory"]))
    for size in sizes:
        if size.problems:
            lines.append(f"\nVERIFICATION FAILED at {size.millions:g} M: {len(size.problems)} "
                         "difference(s), e.g.")
            lines += [f"  {problem}" for problem in size.problems[:10]]
    lines += ["", "seconds: wall clock from process start to exit; ratio = report / baseline; "
                  "CPU s: of the process tree (Python and JVM); peak RSS: of the process tree; "
                  "heap: the JVM heap's peak / live after a collection / size (GC log)"]
    return "\n".join(lines)


def _environment(args: argparse.Namespace) -> dict[str, Any]:
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                         check=False, cwd=ROOT)
    import pyspark

    return {
        "cores": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(), "pyspark": pyspark.__version__,
        "java": java.stderr.splitlines()[0] if java.stderr else None,
        "master": args.master, "driver_memory": args.driver_memory or "Spark's default",
        "conf": args.conf, "git": git.stdout.strip() or None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="time the SLA report against its plain "
                                     "baseline on 1, 2 and 5 M messages")
    parser.add_argument("--sizes", default="1,2,5",
                        type=lambda text: [float(x) for x in text.split(",")],
                        help="millions of messages, comma-separated (default 1,2,5)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/rms-bench"))
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", help="default: Spark's own (1g)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for both runs; repeatable")
    parser.add_argument("--regenerate", action="store_true")
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    environment = _environment(args)
    print(f"report bench: {' '.join(sys.argv)}\n{_conditions(environment)}\n{HEADER}",
          flush=True)
    sizes = []
    for millions in args.sizes:
        sizes.append(bench_size(args, millions))
        print(_row(sizes[-1]), flush=True)
    print("\n" + render(sizes, environment))
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"report_bench-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps({"command": sys.argv, "environment": environment, "sizes": [
        asdict(size) | {"ratio": round(size.ratio, 3), "busy": size.busy} for size in sizes]},
        indent=2) + "\n")
    print(f"written to {path}")
    return 0 if all(size.verified for size in sizes) else 1


if __name__ == "__main__":
    sys.exit(main())
