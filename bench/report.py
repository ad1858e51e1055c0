"""The printed table and the JSON file."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from bench import fullpath, targets

DEFINITIONS = """\
definitions (all times on this machine's clock; full text in bench/README.md):
  throughput  happy/bare/oneshot: transactions without error per second of the load run;
              bulk: messages/s; transaction: 3-message transactions/s; checkback: messages
              resolved per second (gate -> last confirmed_at); redelivery: re-published per
              second (gate -> last published); delayed: scheduled messages published per
              second once due (gate -> last)
  done/s      messages that reached `done` per second, run start (or gate) -> last done_at
  prepare     prepare (send, batch prepare) response end - start (open loop: scheduled start)
  confirm     confirm (batch confirm) response end - prepare response end
  record      consumer receive time - confirm response end (may be < 0: the record can
              arrive before the producer reads the answer); worker paths: - resolution
  done        done_at (database) - receive time of the acknowledged delivery
  resolve     worker paths: confirmed_at / delivery-2 published event - gate; delayed:
              delivery-1 published event - gate (= deliver_after: the lateness)
  RMS/bare    RMS happy-path done/s / bare-baseline done/s at the same load (full
              transactions: prepare, confirm, publish, consume, ack on the ack topic, done)
  cells are p50/p95/p99 in ms"""


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value:.1f}" if abs(value) < 100 else f"{value:.0f}"


def _stage_cell(name: str, figures: dict[str, Any]) -> str:
    if not figures.get("count"):
        return f"{name} -"
    return f"{name} {_ms(figures['p50_ms'])}/{_ms(figures['p95_ms'])}/{_ms(figures['p99_ms'])}"


def _row(run: dict[str, Any]) -> str:
    verified = "ok" if run["verification"]["passed"] else "FAILED"
    if (run.get("machine") or {}).get("busy"):
        verified += " BUSY"
    ratio = f"{run['rms_over_bare']:.2f}" if run.get("rms_over_bare") is not None else "-"
    stages = "  ".join(_stage_cell(n, f) for n, f in run["stages"].items())
    return (f"{run['path']:<10} {run['load']:<10} {run['throughput']:>10,.0f} "
            f"{run['unit']:<13} {run['done_per_s']:>9,.0f} {run['errors']:>6} {ratio:>8} "
            f"{verified:>8}  {stages}")


def _machine(runs: list[dict[str, Any]]) -> list[str]:
    lines = ["", "the machine during each run (CPU outside the benchmark's processes, in cores; "
                 "1-minute load average at start / max / end):"]
    for run in runs:
        machine = run.get("machine")
        if not machine:
            continue
        flag = "  BUSY: not a figure" if machine["busy"] else "  quiet"
        lines.append(f"  {run['path']:<10} {run['load']:<10} other {machine['other_cores']:.2f} "
                     f"cores, load {machine['load_1min_open']:.2f} / {machine['load_1min_max']:.2f}"
                     f" / {machine['load_1min_close']:.2f}{flag}")
    busy = [r for r in runs if (r.get("machine") or {}).get("busy")]
    if busy:
        lines.append(f"  {len(busy)} run(s) shared the machine with other work: their figures "
                     "understate RMS; measure again on a quiet machine")
    return lines


def _processes(runs: Iterable[dict[str, Any]]) -> list[str]:
    lines = ["", "CPU seconds / peak RSS MB per process group during each run:"]
    for run in runs:
        cells = [f"{group} {u['cpu_seconds']:.1f}s/{u['peak_rss_mb']:.0f}MB"
                 for group, u in run["processes"].items()]
        lines.append(f"  {run['path']:<10} {run['load']:<10} " + "  ".join(cells))
    return lines


def _conditions(conditions: dict[str, Any]) -> list[str]:
    pg = conditions["postgresql"]
    packages = " ".join(f"{k} {v}" for k, v in conditions["packages"].items())
    return [
        f"conditions: {conditions['cores']} cores, {conditions['memory_gib']} GiB, load average "
        f"at start {conditions['load_average_at_start']}, {conditions['platform']}",
        f"  Python {conditions['python']}; {packages}",
        f"  PostgreSQL {pg['server_version']} fsync={pg['fsync']} synchronous_commit="
        f"{pg['synchronous_commit']} shared_buffers={pg['shared_buffers']} wal_level="
        f"{pg['wal_level']} max_connections={pg['max_connections']}",
        f"  broker: {conditions['broker']}; rms serve workers: "
        f"{conditions['rms_serve_workers']} (confirm answer: "
        f"{conditions.get('confirm_answer', 'published')}); {conditions['stack']}; "
        f"git {conditions['git_commit']}",
        *([f"  measured servers pinned to CPU {conditions['serve_cpus']}, everything else on "
           "the other CPUs (--pin-serve)"] if conditions.get("serve_cpus") else []),
    ]


def _soak(soak: dict[str, Any] | None) -> list[str]:
    if not soak:
        return []
    return ["", f"soak: rms serve RSS over {soak['seconds']:.0f}s at {soak['rate']:g} tx/s: "
                f"first {soak['first_mb']:.0f} MB, last {soak['last_mb']:.0f} MB, peak "
                f"{soak['peak_mb']:.0f} MB, slope {soak['slope_mb_per_min']:+.2f} MB/min "
                f"({soak['samples']} samples)"]


def _errors(runs: list[dict[str, Any]]) -> list[str]:
    """Failures told apart, for the runs that had any."""
    lines = []
    for run in runs:
        timeouts, refusals = run.get("timeouts", 0), run.get("refusals", 0)
        if run["errors"] or refusals:
            lines.append(f"  {run['path']:<10} {run['load']:<10} time-outs {timeouts}, "
                         f"refusals (429/503) {refusals}, other errors "
                         f"{run['errors'] - timeouts}")
    return ["", "failures by kind:", *lines] if lines else []


def _limits(limits: list[float] | None) -> str:
    return "-" if not limits else "/".join(f"{limit:.0f}" for limit in limits)


def _loop_cpu(shares: list[float] | None) -> str:
    """An event loop's share of the time on a CPU and waiting for one."""
    if not shares:
        return "(CPU time not measured)"
    return f"on a CPU {shares[0]:.0%}, waiting for one {shares[1]:.0%} of the time"


def _overload(runs: list[dict[str, Any]]) -> list[str]:
    lines = []
    for run in runs:
        if (f := run.get("overload")) is None:
            continue
        lines += ["", f"overload ({run['load']} tx/s: calm, overload, calm): capacity "
                      f"{f['capacity']:,.0f} tx/s, offered {f['offered']:,.0f}, goodput "
                      f"{f['goodput']:,.0f} ({f['goodput_share']:.2f} of capacity)",
                  f"  p99 of 2xx answers: prepare {f['p99_prepare_ms']} ms, confirm "
                  f"{f['p99_confirm_ms']} ms; refusals {f['refusals']}, p99 "
                  f"{f['refusal_p99_ms']} ms, max {f['refusal_max_ms']} ms, without Retry-After "
                  f"{f['refusals_without_retry_after']}, after an admitted prepare "
                  f"{f.get('refused_after_prepare', 0)}; limit during the overload "
                  f"(min/median/max) {_limits(f.get('limit_during_overload'))}",
                  f"  time-outs {f['timeouts']}, 5xx other than 503 {f['server_errors']}, other "
                  f"errors {f['other_errors']}; p99 full transaction calm {f['calm_p99_ms']} ms,"
                  f" from 5 s after the overload {f['recovered_p99_ms']} ms",
                  f"  where a refusal's time goes (p99 during the overload): from going out on "
                  f"its connection {f.get('refusal_sent_p99_ms')} ms; event-loop lag (p99, max) of "
                  f"the load generator {f.get('loadgen_lag_p99_ms')}, "
                  f"{f.get('loadgen_lag_max_ms')} ms, of rms serve <= "
                  f"{f.get('server_lag_p99_ms')}, <= {f.get('server_lag_max_ms')} ms; rms serve's "
                  "event loop "
                  f"{_loop_cpu(f.get('server_loop_cpu'))}",
                  "  targets: " + ("all met" if not f["failed_targets"] else
                                   f"{len(f['failed_targets'])} not met (below)")]
    return lines


def _tenants(runs: list[dict[str, Any]]) -> list[str]:
    lines = []
    for run in runs:
        if (t := run.get("tenants")) is None:
            continue
        alone, flooded, flood = t["alone"], t["flooded"], t["flood"]
        lines += ["", f"two tenants ({run['load']} tx/s calm): alone {alone['answered']} of "
                      f"{alone['transactions']} answered, p99 {alone['p99_ms']} ms; beside the "
                      f"flood {flooded['answered']} of {flooded['transactions']}, p99 "
                      f"{flooded['p99_ms']} ms",
                  f"  event-loop lag p99, alone / beside the flood: calm tenant's load generator "
                  f"{alone.get('loadgen_lag_p99_ms')} / {flooded.get('loadgen_lag_p99_ms')} ms, "
                  f"rms serve <= {alone.get('server_lag_p99_ms')} / "
                  f"{flooded.get('server_lag_p99_ms')} ms; rms serve's event loop "
                  f"{_loop_cpu(alone.get('server_loop_cpu'))} / "
                  f"{_loop_cpu(flooded.get('server_loop_cpu'))}",
                  f"  the flood: {flood['clients']} clients, {flood['answered']} of "
                  f"{flood['transactions']} transactions answered, {flood['refusals']} "
                  f"refused, {flood['errors']} errors"]
        lines += [f"  flood error: {sample}" for sample in flood.get("error_samples", [])]
    return lines


def render(result: dict[str, Any]) -> str:
    header = (f"{'path':<10} {'load':<10} {'throughput':>10} {'':<13} {'done/s':>9} "
              f"{'errors':>6} {'RMS/bare':>8} {'verified':>8}  stages p50/p95/p99 ms")
    lines = [*_conditions(result["conditions"]), "", header, "-" * len(header)]
    lines += [_row(run) for run in result["runs"]]
    lines += _processes(result["runs"])
    lines += _machine(result["runs"])
    lines += _soak(result.get("soak"))
    lines += _errors(result["runs"])
    lines += _overload(result["runs"])
    lines += _tenants(result["runs"])
    lines += fullpath.render(result["runs"])
    lines += targets.render(result)
    for run in result["runs"]:
        if run.get("dropped_connection_retries"):
            lines.append(f"{run['path']} {run['load']}: {run['dropped_connection_retries']} "
                         "request(s) sent again after the connection closed before any byte "
                         "of the answer")
        if run["error_samples"]:
            lines.append(f"errors in {run['path']} {run['load']}, e.g.: "
                         f"{run['error_samples'][0][:200]}")
    failed = [r for r in result["runs"] if not r["verification"]["passed"]]
    for run in failed:
        verification = run["verification"]
        lines.append(f"\nVERIFICATION FAILED for {run['path']} {run['load']}: "
                     f"{verification['problems']} problem(s), e.g.")
        lines += [f"  {sample}" for sample in verification["samples"]]
        lines += [f"  target not met: {target}" for target in verification.get("targets_failed",
                                                                                 [])]
    lines += ["", DEFINITIONS]
    return "\n".join(lines)


def add_ratios(runs: list[dict[str, Any]]) -> None:
    """``rms_over_bare`` on each happy-path run that has a bare run at the same load."""
    bare = {run["load"]: run for run in runs if run["path"] == "bare"}
    for run in runs:
        partner = bare.get(run["load"]) if run["path"] == "happy" else None
        if partner and partner["done_per_s"]:
            run["rms_over_bare"] = round(run["done_per_s"] / partner["done_per_s"], 3)


def write_json(result: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
