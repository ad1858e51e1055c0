"""The server image from dist/'s OCI archive: its labels carry the release and the licence; its
own entrypoint (tini, then ``rms``) runs ``--version``, ``migrate`` and ``serve`` against the test
PostgreSQL and Kafka, and the README's walkthrough passes through it (tests/system/release/image_runner.py
says how it runs without a container runtime). deploy/compose is checked against the image: the
OCI configuration carries no health check, so each service of the image brings its own, and
that check, run inside the image as Compose runs it, answers for a live ``rms serve``."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rms.devstack.embedded import EmbeddedPostgres
from rms.devstack.kafka_broker import EmbeddedKafka
from tests.conftest import ADMIN_TOKEN
from tests.system.clients.fixtures import require_tool
from tests.system.release import image_runner
from tests.system.release.conftest import (
    ROOT,
    VERSION,
    artifact,
    free_port,
    fresh_database,
    run,
    wait_ready,
)
from tests.system.release.walkthrough import walkthrough


@pytest.fixture(scope="module")
def image() -> Iterator[image_runner.MountedImage]:
    archive = artifact(f"rms-server-{VERSION}.oci.tar")
    require_tool("buildah")
    require_tool("unshare")
    mounted = image_runner.mount(archive)
    yield mounted
    image_runner.unmount(mounted)


@pytest.mark.timeout(600)  # the first test also loads the archive into buildah's storage
def test_the_labels_carry_the_release_and_the_licence(image: image_runner.MountedImage) -> None:
    assert image.labels["org.opencontainers.image.version"] == VERSION
    assert image.labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert image.config["Entrypoint"] == ["tini", "--", "rms"]
    assert (image.root / "usr/share/doc/rms/LICENSE").is_file()


@pytest.mark.timeout(600)
def test_the_entrypoint_migrates_serves_and_walks_through_the_readme(
        image: image_runner.MountedImage, tmp_path: Path, postgres: EmbeddedPostgres,
        kafka: EmbeddedKafka) -> None:
    suffix = tmp_path.name[-8:]
    env = {"RMS_DATABASE_URL": fresh_database(postgres),
           "RMS_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "RMS_ADMIN_TOKEN": ADMIN_TOKEN,
           "RMS_ALLOW_PRIVATE_CALLBACKS": "true", "RMS_ACK_TOPIC": f"rms.acks.{suffix}",
           # the chroot has a /tmp of its own, so the host's instance slots are not seen there:
           # without a name of its own it would take the ids of a live rms serve of this host
           "RMS_INSTANCE_NAME": f"image-{uuid.uuid4().hex[:12]}"}
    host = {"PATH": os.environ["PATH"]}
    assert run(image.command(["--version"], env), tmp_path, host).strip() == f"rms {VERSION}"
    run(image.command(["migrate"], env), tmp_path, host)
    topic = f"orders.paid.{suffix}"
    run(image.command(["topics", "create", topic], env), tmp_path, host)
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        server = subprocess.Popen(image.command(["serve", "--host", "127.0.0.1", "--port", str(port)],
                                                env), cwd=tmp_path, env=host, stdout=sink,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    health = _health_check(image, compose_services()["api-1"], port)
    try:
        wait_ready(f"http://127.0.0.1:{port}", server, log)
        walkthrough(f"http://127.0.0.1:{port}", ADMIN_TOKEN, topic)
        assert subprocess.run(health, env=host, capture_output=True, timeout=30,
                              check=False).returncode == 0
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
    assert subprocess.run(health, env=host, capture_output=True, timeout=30,
                          check=False).returncode != 0


def compose_services() -> dict[str, dict[str, Any]]:
    compose = yaml.safe_load((ROOT / "deploy" / "compose" / "compose.yaml").read_text())
    return dict(compose["services"])


def _of_the_image(service: dict[str, Any]) -> bool:
    return (service.get("build") or {}).get("target") == "runtime"


def _served_port(service: dict[str, Any]) -> str:
    """The port a service's RMS process listens on (``--port``, ``--metrics-port``)."""
    command = service["command"]
    flag = "--port" if "--port" in command else "--metrics-port"
    return str(command[command.index(flag) + 1])


def _health_check(image: image_runner.MountedImage, service: dict[str, Any], port: int) -> list[str]:
    """A Compose service's health check as Compose runs it in its container (``CMD``: the
    command itself, with the image's environment), aimed at ``port``."""
    kind, *command = service["healthcheck"]["test"]
    assert kind == "CMD"
    served = _served_port(service)
    return image.command([part.replace(f":{served}/", f":{port}/") for part in command[1:]], {},
                         entrypoint=command[:1])


def test_compose_gives_every_service_of_the_image_the_health_check_the_image_lacks(
        image: image_runner.MountedImage) -> None:
    assert not image.config.get("Healthcheck")  # the OCI format has no field for it
    services = compose_services()
    path = next(entry.split("=", 1)[1] for entry in image.config["Env"] if entry.startswith("PATH="))
    checked = []
    for name, service in services.items():
        if not _of_the_image(service) or service.get("restart") == "no":
            continue
        check = service.get("healthcheck") or {}
        assert check.get("test") and not check.get("disable"), name
        kind, executable, *_ = check["test"]
        assert kind == "CMD", name
        assert any((image.root / folder.lstrip("/") / executable).exists()
                   for folder in path.split(":")), (name, executable)
        urls = re.findall(r"http://127\.0\.0\.1:(\d+)/healthz", " ".join(check["test"]))
        assert urls == [_served_port(service)], (name, urls)
        assert f"{urls[0]}/tcp" in image.config["ExposedPorts"], name
        checked.append(name)
    assert {"api-1", "api-2", "confirm-worker", "recovery-worker"} <= set(checked)
    for name, service in services.items():
        waits = service.get("depends_on") or {}
        for dependency, wait in (waits.items() if isinstance(waits, dict) else []):
            if wait.get("condition") == "service_healthy":
                check = services[dependency].get("healthcheck") or {}
                assert check.get("test") and not check.get("disable"), (name, dependency)
