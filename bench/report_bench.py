"""Benchmark of the SLA report: synthetic histories (``bench.history_gen``) of 1, 2 and 5
million messages, each reported by ``python -m spark.job`` on ``local[2]`` from its Parquet
export, timed from process start to exit, with the peak memory of the report's whole process
tree (the Python driver plus the JVM it starts), sampled every 0.2 s with psutil.

    python -m bench.report_bench --sizes 1,2,5 --workdir /tmp/rms-bench --driver-memory 6g

Histories are generated once per size and reused (``--regenerate`` to redo them). Results are
printed and written to ``bench/results/report_bench-<time>.json``. Not a test: run it by hand.
``--percentile-accuracy N`` runs the report with approximate percentiles instead of exact ones.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

from bench.history_gen import generate

RESULTS = Path(__file__).resolve().parent / "results"
MB = 1024 * 1024


@dataclass
class Run:
    messages: int
    events: int
    generate_seconds: float | None
    report_seconds: float
    peak_rss_mb: float
    peak_jvm_rss_mb: float
    exit_code: int
    load_average: tuple[float, float, float]


def _history(workdir: Path, millions: float, regenerate: bool) -> tuple[Path, int, float | None]:
    directory = workdir / f"history-{millions:g}m"
    manifest = directory / "_export.json"
    if regenerate or not manifest.exists():
        shutil.rmtree(directory, ignore_errors=True)
        started = time.perf_counter()
        generate(directory, int(millions * 1_000_000))
        took: float | None = time.perf_counter() - started
    else:
        took = None
    events = json.loads(manifest.read_text())["tables"]["events"]["rows"]
    return directory, int(events), took


def _tree_rss(process: psutil.Process) -> tuple[int, int]:
    """(RSS of the process and all its descendants, RSS of the java ones)."""
    total = jvm = 0
    for member in [process, *process.children(recursive=True)]:
        try:
            rss = member.memory_info().rss
            total += rss
            if "java" in member.name():
                jvm += rss
        except psutil.NoSuchProcess:
            continue
    return total, jvm


def _report(history: Path, out: Path, args: argparse.Namespace) -> tuple[float, int, int, int]:
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "spark.job", "--input", str(history), "--out", str(out),
               "--master", args.master, "--driver-memory", args.driver_memory,
               "--conf", "spark.ui.enabled=false"]
    if args.percentile_accuracy:
        command += ["--percentile-accuracy", str(args.percentile_accuracy)]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    started = time.perf_counter()
    process = psutil.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           cwd=Path(__file__).resolve().parent.parent)
    peak = peak_jvm = 0
    while process.poll() is None:
        total, jvm = _tree_rss(process)
        peak, peak_jvm = max(peak, total), max(peak_jvm, jvm)
        time.sleep(0.2)
    took = time.perf_counter() - started
    if process.returncode != 0:
        assert process.stderr is not None
        print(process.stderr.read().decode()[-3000:], file=sys.stderr)
    return took, peak, peak_jvm, process.returncode


def bench(args: argparse.Namespace) -> list[Run]:
    runs = []
    for millions in args.sizes:
        history, events, generated = _history(args.workdir, millions, args.regenerate)
        took, peak, peak_jvm, code = _report(history, args.workdir / "report", args)
        run = Run(int(millions * 1_000_000), events, generated, round(took, 1),
                  round(peak / MB), round(peak_jvm / MB), code, os.getloadavg())
        print(f"{run.messages:>10,} messages {run.events:>11,} events  report {took:7.1f} s "
              f"({took / millions:6.1f} s per million)  peak RSS {peak / MB:7.0f} MB "
              f"(JVM {peak_jvm / MB:.0f} MB)  exit {code}", flush=True)
        runs.append(run)
    return runs


def _environment(args: argparse.Namespace) -> dict[str, Any]:
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    import pyspark

    return {
        "cpus": os.cpu_count(), "memory_gb": round(psutil.virtual_memory().total / MB / 1024),
        "python": platform.python_version(), "pyspark": pyspark.__version__,
        "java": java.stderr.splitlines()[0] if java.stderr else None,
        "master": args.master, "driver_memory": args.driver_memory,
        "percentile_accuracy": args.percentile_accuracy or "exact",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="time the SLA report on 1, 2 and 5 M messages")
    parser.add_argument("--sizes", default="1,2,5",
                        type=lambda text: [float(x) for x in text.split(",")],
                        help="millions of messages, comma-separated (default 1,2,5)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/rms-bench"))
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="6g")
    parser.add_argument("--percentile-accuracy", type=int,
                        help="pass to the report (default: exact percentiles)")
    parser.add_argument("--regenerate", action="store_true")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    runs = bench(args)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"report_bench-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps({"environment": _environment(args),
                                "runs": [asdict(r) for r in runs]}, indent=2) + "\n")
    print(f"written to {path}")


if __name__ == "__main__":
    main()
