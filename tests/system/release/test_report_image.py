"""Every image the shipped manifests run is one the release builds: the Kubernetes objects and
the Compose file name ``rms-server`` and ``rms-report``, and ``dist/`` holds both archives. The
report image's own CronJob command (``tini -- rms-report-daily``) builds a day's SLA report with
Spark from a live PostgreSQL (tests/system/release/image_runner.py runs it without a container
runtime)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from rms.devstack.embedded import EmbeddedPostgres
from rms.devstack.kafka_broker import EmbeddedKafka
from tests.conftest import ADMIN_TOKEN
from tests.system.clients.fixtures import require_tool
from tests.system.release import image_runner
from tests.system.release.conftest import DIST, ROOT, VERSION, artifact, fresh_database, run

K8S = ROOT / "deploy" / "k8s"


def manifest_images() -> set[str]:
    """The images the Kubernetes base and the Compose file run (RMS's own, without a tag)."""
    names = set()
    for path in (K8S / "base").glob("*.yaml"):
        names |= set(re.findall(r"^\s+image: (\S+)$", path.read_text(), re.MULTILINE))
    compose = yaml.safe_load((ROOT / "deploy" / "compose" / "compose.yaml").read_text())
    for service in compose["services"].values():
        if "build" in service:
            default = re.fullmatch(r"\$\{\w+:-([^:}]+):local\}", service["image"])
            assert default, service["image"]
            names.add(default.group(1))
    return names


def test_every_image_the_manifests_run_is_built_by_the_release() -> None:
    artifact(f"rms-server-{VERSION}.oci.tar")  # dist/ is there
    images = manifest_images()
    assert images == {"rms-server", "rms-report"}
    missing = [name for name in sorted(images) if not (DIST / f"{name}-{VERSION}.oci.tar").is_file()]
    assert missing == []
    for overlay in (K8S / "overlays").iterdir():
        kustomization = yaml.safe_load((overlay / "kustomization.yaml").read_text())
        assert {entry["name"] for entry in kustomization["images"]} == images, overlay.name


@pytest.fixture(scope="module")
def report_image() -> Iterator[image_runner.MountedImage]:
    archive = artifact(f"rms-report-{VERSION}.oci.tar")
    require_tool("buildah")
    require_tool("unshare")
    mounted = image_runner.mount(archive)
    yield mounted
    image_runner.unmount(mounted)


@pytest.mark.timeout(900)
def test_the_report_image_builds_a_days_report_with_its_cronjob_command(
        report_image: image_runner.MountedImage, tmp_path: Path, postgres: EmbeddedPostgres,
        kafka: EmbeddedKafka) -> None:
    assert report_image.labels["org.opencontainers.image.title"] == "rms-report"
    (cronjob,) = [document for document in
                  yaml.safe_load_all((K8S / "base" / "report-cronjob.yaml").read_text())
                  if document and document["kind"] == "CronJob"]
    (container,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    env = {"RMS_DATABASE_URL": fresh_database(postgres), "RMS_ADMIN_TOKEN": ADMIN_TOKEN,
           "RMS_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "REPORT_DAY": "2026-01-01",
           "REPORT_DIR": "/tmp/reports"}
    host = {"PATH": os.environ["PATH"]}
    run(report_image.command(["migrate"], env), tmp_path, host)
    arguments = [*container["args"][:-1], "1g"]  # --driver-memory: the test machine's share
    run(report_image.command(arguments, env, entrypoint=container["command"]), tmp_path, host,
        timeout=800)
    day = report_image.root / "tmp" / "reports" / "2026-01-01"
    summary = json.loads((day / "summary.json").read_text())
    assert summary and (day / "report.html").is_file()
