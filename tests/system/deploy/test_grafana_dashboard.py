"""The Grafana dashboard (deploy/grafana) agrees with the code, the alert rules and the
deployments that provision it. tests/system/monitoring/test_prometheus.py evaluates every query of it
on a real Prometheus scraping a live RMS."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.system.deploy import test_deploy_manifests as manifests
from tests.system.deploy.test_deploy_manifests import (
    ALERT_RULES,
    COMPOSE,
    DEPLOY,
    K8S,
    OVERLAYS,
    Obj,
    alert_rules,
    defined_metrics,
    doc_anchors,
)
from tests.system.deploy.tools import checker_missing

# the manifests' fixtures: deploy/k8s prepared as an operator does, and its overlays rendered
k8s_tree = manifests.k8s_tree
rendered = manifests.rendered

GRAFANA = DEPLOY / "grafana"
DASHBOARD = GRAFANA / "rms-dashboard.json"
HISTOGRAM_SERIES = re.compile(r"_(bucket|sum|count)$")
METRIC = re.compile(r"\brms_[a-z_]+")
# what an operator looks at, each by a metric at least one panel must show
COVERED = {
    "throughput by state change": "rms_transitions_total",
    "publish latency": "rms_publish_seconds",
    "check-back latency": "rms_check_seconds",
    "delayed lateness": "rms_scheduled_lateness_seconds",
    "pending-send backlog": "rms_oldest_pending_send_age_seconds",
    "unacknowledged backlog": "rms_oldest_unacked_age_seconds",
    "scheduled backlog": "rms_scheduled_total",
    "dead letters": "rms_dead_letters_total",
    "check-backs": "rms_checks_total",
    "redeliveries": "rms_redeliveries_total",
    "publish failures by reason": "rms_publish_failures_total",
    "admission limit": "rms_admission_limit",
    "admission refusals": "rms_admission_refused_total",
    "event-loop lag": "rms_event_loop_lag_seconds",
    "loop health": "rms_loop_failing",
    "loop failures": "rms_loop_failures_total",
    "retention": "rms_retention_last_success_timestamp_seconds",
}


def dashboard() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD.read_text()))


def panels() -> list[dict[str, Any]]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def queries() -> list[str]:
    return [target["expr"] for panel in panels() for target in panel["targets"]]


def metric_of(series: str) -> str:
    """The metric a series name belongs to (a histogram's _bucket, _sum and _count)."""
    base = HISTOGRAM_SERIES.sub("", series)
    return base if defined_metrics().get(base) == "histogram" else series


def test_the_dashboard_uses_a_prometheus_data_source_variable() -> None:
    found = dashboard()
    variables = {v["name"]: v for v in found["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert found["schemaVersion"] >= 36 and found["uid"]
    for panel in panels():
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"], panel["title"]
    ids = [p["id"] for p in found["panels"]]
    assert len(ids) == len(set(ids))


def test_every_query_names_metrics_rms_exports() -> None:
    defined = defined_metrics()
    for query in queries():
        for series in METRIC.findall(query):
            assert metric_of(series) in defined, f"{series} in {query!r} is not exported"


def test_the_panels_cover_what_operators_watch() -> None:
    shown = {metric_of(series) for query in queries() for series in METRIC.findall(query)}
    missing = {what: metric for what, metric in COVERED.items() if metric not in shown}
    assert not missing, missing


def test_every_alert_has_a_panel_linking_its_runbook() -> None:
    links = {link["url"] for panel in panels() for link in panel.get("links", [])}
    anchors = doc_anchors()
    for rule in alert_rules():
        anchor = manifests.runbook_anchor(rule)
        assert "${runbook}#" + anchor in links, f"no panel links the runbook of {rule['alert']}"
        assert anchor in anchors
    for link in links:
        assert link.removeprefix("${runbook}#") in anchors, link


def test_kubernetes_copy_is_identical() -> None:
    copy = K8S / "base" / "monitoring" / DASHBOARD.name
    assert copy.read_text() == DASHBOARD.read_text()


def test_every_overlay_provisions_the_dashboard_as_a_config_map(
        rendered: dict[str, list[Obj]]) -> None:
    for overlay in OVERLAYS:
        maps = [o for o in rendered[overlay] if o["kind"] == "ConfigMap"
                and o["metadata"]["name"].startswith("rms-grafana-dashboard")]
        assert len(maps) == 1, overlay
        assert maps[0]["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert json.loads(maps[0]["data"][DASHBOARD.name]) == dashboard()


def compose_service(name: str) -> dict[str, Any]:
    return dict(yaml.safe_load((COMPOSE / "compose.yaml").read_text())["services"][name])


def mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> host path, for the bind mounts of a compose service."""
    found = {}
    for volume in service["volumes"]:
        host, container, *_ = str(volume).split(":")
        if host.startswith("."):
            found[container] = (COMPOSE / host).resolve()
    return found


def test_compose_provisions_grafana_with_the_dashboard_and_prometheus() -> None:
    grafana = mounts(compose_service("grafana"))
    assert grafana["/var/lib/grafana/dashboards/rms-dashboard.json"] == DASHBOARD
    provisioning = grafana["/etc/grafana/provisioning"]
    provider = yaml.safe_load((provisioning / "dashboards" / "rms.yaml").read_text())
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"
    source = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())
    assert source["datasources"][0]["type"] == "prometheus"
    assert source["datasources"][0]["url"] == "http://prometheus:9090"
    prometheus = mounts(compose_service("prometheus"))
    assert prometheus["/etc/prometheus/rms-alerts.yml"] == ALERT_RULES


def test_compose_prometheus_config_passes_promtool(tmp_path: Path) -> None:
    found = shutil.which("promtool")
    if found is None:
        checker_missing("promtool is not installed (bash scripts/system-deps.sh installs "
                        "Debian's prometheus)")
    config = mounts(compose_service("prometheus"))["/etc/prometheus/prometheus.yml"]
    parsed = yaml.safe_load(config.read_text())
    assert parsed["rule_files"] == ["/etc/prometheus/rms-alerts.yml"]
    parsed["rule_files"] = [str(ALERT_RULES)]  # the container's path, here
    local = tmp_path / "prometheus.yml"
    local.write_text(yaml.safe_dump(parsed))
    result = subprocess.run([found, "check", "config", str(local)], capture_output=True,
                            text=True, check=False, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    names = parsed["scrape_configs"][0]["dns_sd_configs"][0]["names"]
    services = yaml.safe_load((COMPOSE / "compose.yaml").read_text())["services"]
    assert set(names) == {"api-1", "api-2", "confirm-worker", "recovery-worker"} <= services.keys()


@pytest.mark.parametrize("path", sorted(GRAFANA.rglob("*.yaml")), ids=lambda p: p.name)
def test_provisioning_files_parse(path: Path) -> None:
    assert yaml.safe_load(path.read_text())["apiVersion"] == 1
