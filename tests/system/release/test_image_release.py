"""The server image from dist/'s OCI archive: its labels carry the release and the licence; its
own entrypoint (tini, then ``rms``) runs ``--version``, ``migrate`` and ``serve`` against the test
PostgreSQL and Kafka, and the README's walkthrough passes through it (tests/system/release/image_runner.py
says how it runs without a container runtime)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rms.devstack.embedded import EmbeddedPostgres
from rms.devstack.kafka_broker import EmbeddedKafka
from tests.conftest import ADMIN_TOKEN
from tests.system.clients.fixtures import require_tool
from tests.system.release import image_runner
from tests.system.release.conftest import VERSION, artifact, free_port, fresh_database, run, wait_ready
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
           "RMS_ALLOW_PRIVATE_CALLBACKS": "true", "RMS_ACK_TOPIC": f"rms.acks.{suffix}"}
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
    try:
        wait_ready(f"http://127.0.0.1:{port}", server, log)
        walkthrough(f"http://127.0.0.1:{port}", ADMIN_TOKEN, topic)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
