"""The Grafana dashboard and the alert rules on a real Prometheus scraping a live RMS under the
fault suite's load: every panel's query answers with data, and the alerts for dead letters and
for a stopped worker fire (their rules are the shipped ones with `for:` shortened)."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import pytest
from aiokafka import AIOKafkaProducer

from tests.system.deploy.test_grafana_dashboard import dashboard
from tests.system.faults.cluster import ADMIN_TOKEN, SETTINGS, Stack
from tests.system.faults.load import Mix
from tests.system.faults.scenario import Scenario, run
from tests.system.monitoring.prometheus import RATE_INTERVAL, Prometheus

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def grafana_expr(expr: str) -> str:
    """The query as Grafana sends it: its template variables substituted."""
    return expr.replace("$__rate_interval", RATE_INTERVAL)


def panel_queries() -> list[tuple[str, str]]:
    return [(panel["title"], grafana_expr(target["expr"])) for panel in dashboard()["panels"]
            if panel["type"] != "row" for target in panel["targets"]]


async def answered_without_data(prom: Prometheus, http: httpx.AsyncClient) -> list[str]:
    missing = []
    for title, expr in panel_queries():
        answer = await prom.query(http, expr)
        if answer["status"] != "success" or not answer["data"]["result"]:
            missing.append(f"{title}: {expr} -> {answer}")
    return missing


async def unacknowledged_dead_letter(stack: Stack) -> None:
    """One message delivered once, never acknowledged, with one delivery allowed: the
    recovery worker flags it dead (delivery-exhausted) once its ack timeout passes."""
    name = f"monitoring-{uuid.uuid4().hex[:6]}"
    created = await stack.http.post(f"{stack.api}/v1/admin/apps",
                                    headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
                                    json={"name": name, "produce_topics": [f"{name}.*"],
                                          "consume_topics": ["none"],
                                          "check_url_prefixes": [stack.check_url]})
    assert created.status_code == 201, created.text
    key = created.json()["api_key"]
    sent = await stack.http.post(f"{stack.api}/v1/messages/send",
                                 headers={"Authorization": f"Bearer {key}"},
                                 json={"topic": f"{name}.events", "payload": {"n": 1},
                                       "check_url": stack.check_url, "max_deliveries": 1,
                                       "ack_timeout_seconds": 1})
    assert sent.status_code == 201, sent.text


async def owed_message(stack: Stack) -> None:
    """One message a registered consumer app owes and does not ack while the panels are read
    (a long ack timeout: it never goes dead during the test)."""
    name = f"owing-{uuid.uuid4().hex[:6]}"
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    keys = {}
    for app, produce, consume in ((name, [f"{name}.*"], ["none"]),
                                  (f"{name}-reader", ["none"], [f"{name}.events"])):
        created = await stack.http.post(f"{stack.api}/v1/admin/apps", headers=admin,
                                        json={"name": app, "produce_topics": produce,
                                              "consume_topics": consume,
                                              "check_url_prefixes": [stack.check_url]})
        assert created.status_code == 201, created.text
        keys[app] = created.json()["api_key"]
    sent = await stack.http.post(f"{stack.api}/v1/messages/send",
                                 headers={"Authorization": f"Bearer {keys[name]}"},
                                 json={"topic": f"{name}.events", "payload": {"n": 1},
                                       "check_url": stack.check_url,
                                       "ack_timeout_seconds": 3600})
    assert sent.status_code == 201, sent.text
    assert [s["app"] for s in sent.json()["subscribers"]] == [f"{name}-reader"], sent.text


async def malformed_ack_record(stack: Stack) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=stack.infra.bootstrap_servers)
    await producer.start()
    try:
        await producer.send_and_wait(SETTINGS["RMS_ACK_TOPIC"], b"not an ack")
    finally:
        await producer.stop()


async def test_every_panel_returns_data_and_the_alerts_fire(live: Stack,
                                                            scraping: Prometheus) -> None:
    # no message for the consumer app that never acks: none may go dead before the quiet check
    mix = Mix(transactions=0.2, ordered=0.25, delayed=0.3, audited=0.0)
    report = await run(live, Scenario("monitoring", [], seconds=10.0, retention=True, mix=mix),
                       seed=21)
    assert not report.violations and not report.server_errors, report.describe()
    await malformed_ack_record(live)
    await owed_message(live)  # the per-consumer panels show a consumer that owes
    await asyncio.sleep(6)  # a few scrapes after the last records, the retention run, the ack
    http = live.http
    assert set((await scraping.up(http)).values()) == {1.0}, scraping.log_tail()
    published = await scraping.query(http, "sum(rms_publishes_total)")
    assert float(published["data"]["result"][0]["value"][1]) > 0, published
    missing = await answered_without_data(scraping, http)
    assert not missing, "\n".join(missing)

    quiet = {labels["alertname"] for labels in await scraping.firing(http)}
    assert not quiet & {"RMSDeadLetters", "RMSWorkersMissing", "RMSMetricsMissing"}, quiet

    await unacknowledged_dead_letter(live)
    dead_after = await scraping.wait_firing(http, "RMSDeadLetters", reason="delivery-exhausted")
    worker = live.of_kind("confirm-worker")[0]
    worker.terminate()
    await worker.stop(time.monotonic() + 10)
    missing_after = await scraping.wait_firing(http, "RMSWorkersMissing",
                                               component="confirm-worker")
    print(f"RMSDeadLetters fired {dead_after:.1f} s after the send; RMSWorkersMissing "
          f"{missing_after:.1f} s after the confirm worker stopped (for: 2s, scrapes 1 s)")
