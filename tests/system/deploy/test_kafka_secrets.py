"""deploy/ carries Kafka's password and keys as secrets: compose secrets, the Kubernetes
Secret and the kafka-tls component, systemd credentials; never a plain value."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from rms.config import KafkaSettings

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
RMS_SERVICES = ("api-1", "api-2", "confirm-worker", "recovery-worker")


def test_compose_takes_the_password_and_ca_from_secrets() -> None:
    override = yaml.safe_load((DEPLOY / "compose" / "compose.kafka-sasl.yaml").read_text())
    base = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())
    files = {name: spec["file"] for name, spec in override["secrets"].items()}
    for service in RMS_SERVICES:
        assert service in base["services"], service
        merged = override["services"][service]
        environment = merged["environment"]
        assert "RMS_KAFKA_SASL_PASSWORD" not in environment
        assert environment["RMS_KAFKA_SASL_PASSWORD_FILE"] == "/run/secrets/kafka-password"
        assert environment["RMS_KAFKA_SSL_CAFILE"] == "/run/secrets/kafka-ca.pem"
        assert set(merged["secrets"]) == set(files)
        assert {f"RMS_{name.upper()}" for name in KafkaSettings.model_fields} >= set(environment)
    assert all(path.startswith("./secrets/") for path in files.values())
    assert "compose/secrets/" in (DEPLOY / ".gitignore").read_text()


def _render(tree: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: the kafka-tls component is not rendered")
    result = subprocess.run([kubectl, "kustomize", str(tree)], capture_output=True, text=True,
                            check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def test_kubernetes_mounts_the_kafka_tls_secret_in_every_rms_deployment(tmp_path: Path) -> None:
    tree = tmp_path / "k8s"
    shutil.copytree(DEPLOY / "k8s", tree)
    production = tree / "overlays" / "production"
    example = (production / "secrets.env.example").read_text()
    assert "\nRMS_KAFKA_SASL_PASSWORD=\n" in example  # a Secret key, empty until filled in
    (production / "secrets.env").write_text(
        "RMS_DATABASE_URL=x\nRMS_ADMIN_TOKEN=y\nRMS_KAFKA_SASL_PASSWORD=z\n")
    overlay = tree / "overlays" / "with-kafka-tls"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": ["../production"], "components": ["../../components/kafka-tls"]}))
    objects = _render(overlay)
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    assert len(deployments) == 3
    for deployment in deployments:
        pod = deployment["spec"]["template"]["spec"]
        (volume,) = [v for v in pod["volumes"] if v["name"] == "kafka-tls"]
        assert volume["secret"]["secretName"] == "rms-kafka-tls"
        assert volume["secret"]["defaultMode"] == 0o440 and pod["securityContext"]["fsGroup"]
        mounts = pod["containers"][0]["volumeMounts"]
        assert {"name": "kafka-tls", "mountPath": "/etc/rms/kafka", "readOnly": True} in mounts
    configs = [o for o in objects if o["kind"] == "ConfigMap"]
    assert all("RMS_KAFKA_SASL_PASSWORD" not in o.get("data", {}) for o in configs)
    secrets = [o for o in objects if o["kind"] == "Secret"]
    assert any("RMS_KAFKA_SASL_PASSWORD" in o.get("data", {}) for o in secrets)


def test_systemd_hands_the_password_over_as_a_credential() -> None:
    dropin = (DEPLOY / "systemd" / "kafka-credentials.conf.example").read_text()
    assert "LoadCredential=kafka-password:/etc/rms/credentials/kafka-password" in dropin
    assert "Environment=RMS_KAFKA_SASL_PASSWORD_FILE=/run/credentials/%n/kafka-password" in dropin
    environment = (DEPLOY / "systemd" / "rms.env.example").read_text()
    assert "RMS_KAFKA_SASL_PASSWORD" not in environment
