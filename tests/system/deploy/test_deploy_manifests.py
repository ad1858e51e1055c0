"""The deployment files (Dockerfile, deploy/, docs/operations/) agree with the code.

Everything here runs without a container engine: every YAML file parses, kustomize renders
the overlays (with ``kubectl kustomize`` or ``kustomize build`` when installed), every
command, ``RMS_`` setting, probe path, image and metric the manifests name exists in the
code, and the systemd units, shell scripts, Kubernetes objects, compose file and alert rules
pass their own checkers. `make test` installs the checkers; without one, its part skips naming
what to install, or fails under ``CI=true`` (tests/system/deploy/tools.py). The retention and report
scripts run for real: retention against PostgreSQL.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rms.cli import COMMANDS
from rms.config import Settings
from rms.devstack.embedded import EmbeddedPostgres
from spark.session import JDBC_JAR_VARIABLE
from tests.system.deploy.tools import checker_missing

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
SCRIPTS = DEPLOY / "scripts"
SYSTEMD = DEPLOY / "systemd"
COMPOSE = DEPLOY / "compose"
ALERT_RULES = DEPLOY / "prometheus" / "rms-alerts.yml"
ALERT_TESTS = ALERT_RULES.parent / "tests"  # one promtool unit-test file per alert
OPERATIONS = ROOT / "docs" / "operations"  # the operations guide, a page per topic
RUNBOOKS = OPERATIONS / "alerts.md"  # the alert rules' runbook annotations point here
DOCKERFILE = ROOT / "Dockerfile"

# What the services expose and the alert rules use; docs/operations/monitoring.md, "Metrics", lists
# the same (checked below), and a check of the code can compare against this.
METRICS: dict[str, str] = {
    "rms_dead_letters_total": "counter",
    "rms_oldest_pending_send_age_seconds": "gauge",
    "rms_oldest_unacked_age_seconds": "gauge",
    "rms_checks_total": "counter",
    "rms_publish_failures_total": "counter",
    "rms_redeliveries_total": "counter",
    "rms_loop_failing": "gauge",
    "rms_consumer_unacked_messages": "gauge",
    "rms_consumer_seconds_since_ack": "gauge",
}
PROBES = {"readinessProbe": "/readyz", "livenessProbe": "/healthz", "startupProbe": "/healthz"}
HEALTH_PATHS = {"/healthz", "/readyz"}
IMAGE_TARGETS = {"rms-server": "runtime", "rms-report": "report"}  # image name -> Dockerfile stage
LONG_RUNNING = {"api": "serve", "confirm-worker": "confirm-worker",
                "recovery-worker": "recovery-worker"}
OVERLAYS = ("staging", "production")
K8S_VERSIONS = ("1.27.0", "1.34.0")  # staging's and production's; CronJob timeZone: 1.27+
SETTING = re.compile(r"(?<![A-Za-z0-9_])RMS_[A-Z0-9_]+")
SHELL_RMS = re.compile(r"^\s*(?:exec\s+)?rms\s+([a-z][a-z-]*)", re.MULTILINE)
TEST_SECRETS = {"RMS_DATABASE_URL": "postgresql+asyncpg://rms:test@db.invalid:5432/rms",
                "RMS_ADMIN_TOKEN": "test-admin-token-not-secret",
                "RMS_KAFKA_SASL_PASSWORD": ""}

Obj = dict[str, Any]


# --------------------------------------------------------------------------- helpers


def load_all(path: Path) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def yaml_files() -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*") if p.suffix in {".yaml", ".yml"})


def text_files() -> list[Path]:
    files = [p for p in DEPLOY.rglob("*") if p.is_file()]
    return sorted([*files, DOCKERFILE, ROOT / ".dockerignore", *OPERATIONS.glob("*.md")])


def setting_names() -> set[str]:
    prefix = str(Settings.model_config.get("env_prefix", "RMS_"))
    return {f"{prefix}{name}".upper() for name in Settings.model_fields}


def env_file(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def pod_spec(obj: Obj) -> Obj | None:
    kind = obj.get("kind")
    if kind in {"Deployment", "Job", "StatefulSet", "DaemonSet"}:
        return dict(obj["spec"]["template"]["spec"])
    if kind == "CronJob":
        return dict(obj["spec"]["jobTemplate"]["spec"]["template"]["spec"])
    return None


def pod_template(obj: Obj) -> Obj:
    spec = obj["spec"]
    return dict(spec["jobTemplate"]["spec"]["template"] if obj["kind"] == "CronJob"
                else spec["template"])


def containers(obj: Obj) -> list[Obj]:
    spec = pod_spec(obj)
    return [] if spec is None else [*spec.get("initContainers", []), *spec["containers"]]


def image_name(image: str) -> str:
    """``registry.example.com/rms-report:0.1.0`` -> ``rms-report``."""
    return image.split("@")[0].rsplit("/", 1)[-1].split(":")[0]


def rms_invocations(argv: list[str], entrypoint_is_rms: bool) -> list[list[str]]:
    """The ``rms`` argument lists an argv runs: the image's entrypoint is ``tini -- rms``."""
    if entrypoint_is_rms:
        return [argv]
    found = [argv[i + 1:] for i, word in enumerate(argv) if Path(word).name == "rms"]
    for word in argv:
        found += [[name] for name in SHELL_RMS.findall(word) if " " in word]
    return found


def script_names(argv: list[str]) -> list[str]:
    return [Path(word).name for word in argv if Path(word).name.startswith("rms-")]


def component(obj: Obj) -> str:
    return str(obj["metadata"].get("labels", {}).get("app.kubernetes.io/component", ""))


def workloads(objects: list[Obj]) -> list[Obj]:
    return [obj for obj in objects if pod_spec(obj) is not None]


def by_kind(objects: list[Obj], kind: str) -> list[Obj]:
    return [obj for obj in objects if obj.get("kind") == kind]


def parse_cli(command: str, args: list[str]) -> None:
    """Parse ``args`` with the command's real argparse parser (skips if not written yet)."""
    module_name = COMMANDS[command][0]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            pytest.skip(f"{module_name} does not exist yet: `rms {command}` arguments unchecked")
        raise
    parser = argparse.ArgumentParser(prog=f"rms {command}")
    module.configure(parser)
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            parser.parse_args(args)
    except SystemExit:
        pytest.fail(f"`rms {command} {' '.join(args)}` is rejected: {errors.getvalue()}")


# --------------------------------------------------------------------------- YAML, kustomize


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_yaml_file_parses(path: Path) -> None:
    assert load_all(path), f"{path} is empty"


def kustomization_dirs() -> list[Path]:
    return sorted(p.parent for p in K8S.rglob("kustomization.yaml"))


def referenced_paths(directory: Path) -> Iterator[Path]:
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    for entry in [*kustomization.get("resources", []), *kustomization.get("components", [])]:
        yield directory / entry
    for patch in kustomization.get("patches", []):
        if "path" in patch:
            yield directory / patch["path"]
    generators = [*kustomization.get("configMapGenerator", []),
                  *kustomization.get("secretGenerator", [])]
    for generator in generators:
        for item in [*generator.get("envs", []), *generator.get("files", [])]:
            yield directory / str(item).split("=", 1)[-1]


@pytest.mark.parametrize("directory", kustomization_dirs(), ids=lambda p: str(p.relative_to(K8S)))
def test_kustomization_references_exist(directory: Path) -> None:
    for path in referenced_paths(directory):
        if path.name == "secrets.env":  # created by the operator from the example
            assert path.with_name("secrets.env.example").is_file(), path
            continue
        assert path.exists(), f"{directory}/kustomization.yaml names missing {path}"
        if path.is_dir():
            assert (path / "kustomization.yaml").is_file(), f"{path} is not a kustomization"
        else:
            assert load_all(path) if path.suffix in {".yaml", ".yml"} else path.read_text()


def test_secret_examples_leave_every_secret_empty() -> None:
    """Copying an example without filling it in must fail loudly, never run with a default."""
    examples = [*K8S.glob("overlays/*/secrets.env.example"), COMPOSE / ".env.example",
                SYSTEMD / "rms.env.example"]
    for example in examples:
        values = env_file(example)
        for key in ("RMS_ADMIN_TOKEN", "RMS_DATABASE_URL", "POSTGRES_PASSWORD"):
            assert values.get(key, "") == "", f"{example}: {key} must be empty"


def renderer() -> list[str] | None:
    if kustomize := shutil.which("kustomize"):
        return [kustomize, "build"]
    if kubectl := shutil.which("kubectl"):
        return [kubectl, "kustomize"]
    return None


def render(directory: Path) -> list[Obj]:
    command = renderer()
    assert command is not None
    result = subprocess.run([*command, str(directory)], capture_output=True, text=True,
                            check=False, timeout=60)
    assert result.returncode == 0, f"kustomize {directory}: {result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc is not None]


@pytest.fixture(scope="module")
def k8s_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """deploy/k8s as an operator prepares it: secrets.env filled in from the examples, and
    an extra overlay that adds the prometheus-operator component to production."""
    tree = tmp_path_factory.mktemp("k8s") / "k8s"
    shutil.copytree(K8S, tree)
    for overlay in OVERLAYS:
        keys = env_file(tree / "overlays" / overlay / "secrets.env.example")
        lines = [f"{key}={TEST_SECRETS[key]}" for key in keys]
        (tree / "overlays" / overlay / "secrets.env").write_text("\n".join(lines) + "\n")
    extra = tree / "overlays" / "with-prometheus-operator"
    extra.mkdir()
    (extra / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": ["../production"],
        "components": ["../../components/prometheus-operator"],
    }))
    return tree


@pytest.fixture(scope="module")
def rendered(k8s_tree: Path) -> dict[str, list[Obj]]:
    if renderer() is None:
        checker_missing("neither kustomize nor kubectl is installed: overlays not rendered "
                        "(install kubectl or kustomize)")
    names = ["base", *(f"overlays/{o}" for o in OVERLAYS), "overlays/with-prometheus-operator"]
    return {name.removeprefix("overlays/"): render(k8s_tree / name) for name in names}


@pytest.fixture(scope="module")
def k8s_objects(k8s_tree: Path) -> list[Obj]:
    """The rendered overlays, or without a renderer the base's own files."""
    if renderer() is not None:
        return [obj for overlay in OVERLAYS for obj in render(k8s_tree / "overlays" / overlay)]
    base = yaml.safe_load((K8S / "base" / "kustomization.yaml").read_text())
    return [doc for name in base["resources"] for doc in load_all(K8S / "base" / name)]


def test_overlays_render_with_namespace_images_and_secret(rendered: dict[str, list[Obj]]
                                                          ) -> None:
    for overlay, namespace in (("staging", "rms-staging"), ("production", "rms")):
        objects = rendered[overlay]
        namespaced = [o for o in objects if o["kind"] != "Namespace"]
        assert {o["metadata"].get("namespace") for o in namespaced} == {namespace}, overlay
        images = {c["image"] for o in objects for c in containers(o)}
        assert all("/" in image and ":" in image for image in images), images
        secrets = {o["metadata"]["name"] for o in by_kind(objects, "Secret")}
        assert any(name.startswith("rms-secrets-") for name in secrets), secrets


def test_config_and_secret_references_resolve(rendered: dict[str, list[Obj]]) -> None:
    for overlay in OVERLAYS:
        objects = rendered[overlay]
        names = {(o["kind"], o["metadata"]["name"]) for o in objects}
        for workload in workloads(objects):
            for container in containers(workload):
                for source in container.get("envFrom", []):
                    kind, ref = (("ConfigMap", source["configMapRef"]) if "configMapRef" in source
                                 else ("Secret", source["secretRef"]))
                    assert (kind, ref["name"]) in names, f"{overlay}: no {kind} {ref['name']}"
            for volume in pod_spec(workload).get("volumes", []):  # type: ignore[union-attr]
                if claim := volume.get("persistentVolumeClaim"):
                    assert ("PersistentVolumeClaim", claim["claimName"]) in names


def test_overlays_run_the_api_with_overload_protection(rendered: dict[str, list[Obj]]
                                                      ) -> None:
    """The setting's default and every deployment agree: the API's concurrency gate is on."""
    assert Settings.model_fields["admission_enabled"].default is True
    for overlay in OVERLAYS:
        (config,) = [o for o in by_kind(rendered[overlay], "ConfigMap")
                     if o["metadata"]["name"].startswith("rms-config")]
        assert config["data"]["RMS_ADMISSION_ENABLED"] == "true", overlay


def operations_guide() -> str:
    """Every page of the operations guide, one after the other."""
    return "\n".join(page.read_text() for page in sorted(OPERATIONS.glob("*.md")))


def doc_patches() -> dict[str, str]:
    """The overlay patches the operations guide shows, by file name."""
    blocks = re.findall(r"```yaml\n(.*?)```", operations_guide(), re.DOTALL)
    return {match.group(1): block for block in blocks
            if (match := re.match(r"# overlays/production/patches/(\S+\.yaml)", block))}


def test_operations_guide_yaml_parses() -> None:
    for block in re.findall(r"```yaml\n(.*?)```", operations_guide(), re.DOTALL):
        assert yaml.safe_load(block), block


def test_patches_in_the_guide_apply_to_production(k8s_tree: Path,
                                                  rendered: dict[str, list[Obj]]) -> None:
    patches = doc_patches()
    assert patches, "the operations guide shows no overlay patches"
    overlay = k8s_tree / "overlays" / "production-with-guide-patches"
    shutil.copytree(k8s_tree / "overlays" / "production", overlay)
    for name, text in patches.items():
        (overlay / "patches" / name).write_text(text)
    kustomization = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    kustomization["patches"] += [{"path": f"patches/{name}"} for name in patches]
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    objects = {(o["kind"], o["metadata"]["name"]): o for o in render(overlay)}
    report = containers(objects["CronJob", "rms-report"])[0]
    assert "--master" in report["args"]
    retention = containers(objects["CronJob", "rms-retention"])[0]
    assert {"name": "RMS_RETENTION_ARCHIVE_DIR", "value": "/var/lib/rms/archive"} in retention["env"]


def test_prometheus_operator_component_carries_the_same_rules(rendered: dict[str, list[Obj]]
                                                              ) -> None:
    objects = rendered["with-prometheus-operator"]
    (rule,) = by_kind(objects, "PrometheusRule")
    assert rule["spec"] == yaml.safe_load(ALERT_RULES.read_text())
    assert by_kind(objects, "PodMonitor")


def test_rendered_objects_match_the_kubernetes_schemas(rendered: dict[str, list[Obj]]) -> None:
    try:
        validator = importlib.import_module("kubernetes_validate")
    except ModuleNotFoundError:
        checker_missing("kubernetes-validate is not installed: schemas not checked "
                        "(pip install -e '.[test]')")
    for overlay, version in zip(OVERLAYS, K8S_VERSIONS, strict=True):  # oldest and newest
        for obj in rendered[overlay]:
            try:
                validator.validate(obj, version, strict=True)
            except validator.ValidationError as exc:
                pytest.fail(f"{overlay} {obj['kind']}/{obj['metadata']['name']} "
                            f"(Kubernetes {version}): {exc.json_path}: {exc.message}")


# --------------------------------------------------------------------------- Kubernetes shape


def test_workloads_use_only_images_built_by_the_dockerfile(k8s_objects: list[Obj]) -> None:
    stages = dockerfile_stages()
    for workload in workloads(k8s_objects):
        for container in containers(workload):
            name = image_name(container["image"])
            assert name in IMAGE_TARGETS, f"{container['name']}: unknown image {name}"
            assert IMAGE_TARGETS[name] in stages


def test_workloads_run_existing_commands_and_scripts(k8s_objects: list[Obj]) -> None:
    for workload in workloads(k8s_objects):
        for container in containers(workload):
            argv = [*container.get("command", []), *container.get("args", [])]
            invocations = rms_invocations(argv, "command" not in container)
            for invocation in invocations:
                assert invocation and invocation[0] in COMMANDS, f"{container['name']}: {argv}"
            for script in script_names(argv):
                assert (SCRIPTS / script).is_file(), f"{container['name']} runs {script}"
            assert invocations or script_names(argv), f"{container['name']} runs no RMS code"


def test_probes_use_health_endpoints(k8s_objects: list[Obj]) -> None:
    for workload in workloads(k8s_objects):
        for container in containers(workload):
            for probe, path in PROBES.items():
                if probe in container:
                    assert container[probe]["httpGet"]["path"] == path, container["name"]
            if workload["kind"] == "Deployment":
                assert {"readinessProbe", "livenessProbe"} <= container.keys(), container["name"]


def test_every_http_get_targets_a_health_endpoint() -> None:
    def paths(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            if "httpGet" in node:
                yield node["httpGet"]["path"]
            for value in node.values():
                yield from paths(value)
        elif isinstance(node, list):
            for value in node:
                yield from paths(value)

    for path in yaml_files():
        for doc in load_all(path):
            assert set(paths(doc)) <= HEALTH_PATHS, path
    compose = (COMPOSE / "compose.yaml").read_text()
    urls = re.findall(r"http://[\w.-]+:\d+(/[\w/-]*)", compose + DOCKERFILE.read_text())
    assert urls and set(urls) <= HEALTH_PATHS, urls


def test_long_running_services_scale_safely(k8s_objects: list[Obj]) -> None:
    deployments = {component(d): d for d in by_kind(k8s_objects, "Deployment")}
    assert set(deployments) == set(LONG_RUNNING)
    hpas = {h["spec"]["scaleTargetRef"]["name"] for h in by_kind(k8s_objects, "HorizontalPodAutoscaler")}
    pdbs = by_kind(k8s_objects, "PodDisruptionBudget")
    for name, deployment in deployments.items():
        (container,) = containers(deployment)
        assert rms_invocations(container["args"], True)[0][0] == LONG_RUNNING[name]
        assert "replicas" not in deployment["spec"], f"{name}: the HPA owns replicas"
        assert deployment["metadata"]["name"] in hpas, f"no HPA for {name}"
        labels = pod_template(deployment)["metadata"]["labels"]
        assert any(pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
                   for pdb in pdbs), f"no PodDisruptionBudget for {name}"


def test_containers_request_resources_and_run_unprivileged(k8s_objects: list[Obj]) -> None:
    for workload in workloads(k8s_objects):
        assert pod_spec(workload)["securityContext"]["runAsNonRoot"] is True  # type: ignore[index]
        for container in containers(workload):
            assert {"cpu", "memory"} <= container["resources"]["requests"].keys()
            assert "memory" in container["resources"]["limits"]
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False
            assert context["readOnlyRootFilesystem"] is True


def test_services_are_scraped_by_prometheus(k8s_objects: list[Obj]) -> None:
    for deployment in by_kind(k8s_objects, "Deployment"):
        annotations = pod_template(deployment)["metadata"]["annotations"]
        ports = {str(p["containerPort"]) for c in containers(deployment) for p in c["ports"]}
        assert annotations["prometheus.io/scrape"] == "true"
        assert annotations["prometheus.io/path"] == "/metrics"
        assert annotations["prometheus.io/port"] in ports


def test_jobs_migrate_report_and_retain(k8s_objects: list[Obj]) -> None:
    jobs = by_kind(k8s_objects, "Job")
    assert jobs and all(containers(job)[0]["args"] == ["migrate"] for job in jobs)
    cron = {component(c): c for c in by_kind(k8s_objects, "CronJob")}
    assert set(cron) == {"report", "retention"}
    for cronjob in cron.values():
        assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
        assert image_name(containers(cronjob)[0]["image"]) == "rms-report"


def test_network_policy_lets_only_confirm_workers_call_out(k8s_objects: list[Obj]) -> None:
    policies = by_kind(k8s_objects, "NetworkPolicy")
    deny = [p for p in policies if set(p["spec"].get("policyTypes", [])) == {"Ingress", "Egress"}
            and "ingress" not in p["spec"] and "egress" not in p["spec"]]
    assert deny and deny[0]["spec"]["podSelector"] == {
        "matchLabels": {"app.kubernetes.io/name": "rms"}}
    for policy in policies:
        for rule in policy["spec"].get("egress", []):
            ports = {p["port"] for p in rule.get("ports", [])}
            if ports <= {53, 5432, 9092} and ports:
                continue
            selector = policy["spec"]["podSelector"]["matchLabels"]
            assert selector.get("app.kubernetes.io/component") == "confirm-worker", policy


# --------------------------------------------------------------------------- names vs code


@pytest.mark.parametrize("path", text_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_rms_variable_is_a_setting(path: Path) -> None:
    """Every RMS_ variable named is a setting, or one the report commands read themselves."""
    unknown = set(SETTING.findall(path.read_text())) - setting_names() - {JDBC_JAR_VARIABLE}
    assert not unknown, f"{path.relative_to(ROOT)} names settings rms.config lacks: {unknown}"


def env_names_of_rms_containers(k8s: list[Obj]) -> set[str]:
    names = {e["name"] for w in workloads(k8s) for c in containers(w) for e in c.get("env", [])}
    names |= set(env_file(K8S / "base" / "retention.env"))
    compose = yaml.safe_load((COMPOSE / "compose.yaml").read_text())
    for service in compose["services"].values():
        if "build" in service:
            names |= set(service.get("environment", {}))
    return names


def test_other_variables_are_read_by_the_scripts(k8s_objects: list[Obj]) -> None:
    scripts = "\n".join(p.read_text() for p in SCRIPTS.iterdir())
    for name in env_names_of_rms_containers(k8s_objects) - setting_names():
        assert re.search(rf"\$\{{?{name}\b", scripts), f"no script reads {name}"


def cli_invocations() -> list[tuple[str, list[str]]]:
    """Every ``rms`` command line in the raw manifests, compose file and systemd units."""
    found: list[tuple[str, list[str]]] = []
    for path in [*K8S.rglob("*.yaml"), COMPOSE / "compose.yaml"]:
        for doc in load_all(path):
            for container in manifest_containers(doc):
                argv = [*container.get("command", []), *container.get("args", [])]
                is_rms = "command" not in container
                found += [(str(path), inv) for inv in rms_invocations(argv, is_rms)]
    for unit in SYSTEMD.glob("*.service"):
        for line in unit.read_text().splitlines():
            if line.startswith("ExecStart="):
                argv = line.removeprefix("ExecStart=").replace("%i", "8000").split()
                found += [(str(unit), inv) for inv in rms_invocations(argv, False)]
    return [(source, inv) for source, inv in found if inv]


def manifest_containers(doc: Any) -> list[Obj]:
    """Containers of a Kubernetes object, or the RMS services of a compose file."""
    if isinstance(doc, dict) and "services" in doc:
        services = [s for s in doc["services"].values() if "build" in s]
        return [{"args": s.get("command", []), **({"command": s["entrypoint"]}
                 if "entrypoint" in s else {})} for s in services]
    return containers(doc) if isinstance(doc, dict) and "kind" in doc else []


@pytest.mark.parametrize(
    ("source", "invocation"),
    [pytest.param(source, inv, id=f"{Path(source).relative_to(DEPLOY)}:{inv[0]}")
     for source, inv in cli_invocations()],
)
def test_cli_arguments_parse(source: str, invocation: list[str]) -> None:
    """Each command line parses with the real argparse parser of its command."""
    command, *args = invocation
    assert command in COMMANDS, f"{source}: `rms {command}` is not a command"
    parse_cli(command, args)


def test_manifests_run_only_scripts_the_images_ship() -> None:
    for path in [*K8S.rglob("*.yaml"), COMPOSE / "compose.yaml"]:
        for doc in load_all(path):
            for container in manifest_containers(doc):
                argv = [*container.get("command", []), *container.get("args", [])]
                for script in script_names(argv):
                    assert (SCRIPTS / script).is_file(), f"{path} runs {script}"


def test_compose_and_units_cover_the_three_processes() -> None:
    commands = {inv[0] for _, inv in cli_invocations()}
    assert {"serve", "confirm-worker", "recovery-worker", "migrate"} <= commands


# --------------------------------------------------------------------------- Dockerfile


def dockerfile_lines() -> list[str]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    return [line.strip() for line in text.splitlines() if line.strip()
            and not line.lstrip().startswith("#")]


def dockerfile_stages() -> dict[str, list[str]]:
    stages: dict[str, list[str]] = {}
    current: list[str] = []
    for line in dockerfile_lines():
        if match := re.match(r"FROM\s+\S+\s+AS\s+(\S+)", line, re.IGNORECASE):
            current = stages.setdefault(match.group(1), [])
        current.append(line)
    return stages


def test_dockerfile_base_is_pinned_python_slim() -> None:
    (arg,) = [line for line in dockerfile_lines() if line.startswith("ARG PYTHON_IMAGE=")]
    assert re.fullmatch(r"ARG PYTHON_IMAGE=python:3\.11\.\d+-slim-bookworm", arg), arg


def test_dockerfile_images_run_rms_as_non_root() -> None:
    stages = dockerfile_stages()
    assert list(stages)[-1] == IMAGE_TARGETS["rms-server"], "the default target must be last"
    for target in IMAGE_TARGETS.values():
        lines = stages[target]
        users = [line.split()[1] for line in lines if line.startswith("USER ")]
        assert users and users[-1].split(":")[0] not in {"0", "root"}, target
        (entrypoint,) = [json.loads(line[len("ENTRYPOINT "):]) for line in lines
                         if line.startswith("ENTRYPOINT ")]
        assert entrypoint[-1] == "rms", entrypoint
        (cmd,) = [json.loads(line[len("CMD "):]) for line in lines if line.startswith("CMD ")]
        assert cmd[0] in COMMANDS
    assert "openjdk-17-jre-headless" in " ".join(stages["report"])


def test_dockerfile_healthcheck_uses_python_and_healthz() -> None:
    (check,) = [line for line in dockerfile_lines() if line.startswith("HEALTHCHECK")]
    assert "python" in check and "/healthz" in check and "curl" not in check


def copied_from_context() -> set[str]:
    """The build-context paths the Dockerfile copies (``COPY --from=...`` excluded)."""
    copies = [line.split()[1:-1] for line in dockerfile_lines()
              if line.startswith("COPY ") and "--from=" not in line]
    return {src.rstrip("/") for sources in copies for src in sources if not src.startswith("--")}


def test_dockerfile_copies_every_package_and_dockerignore_allows_it() -> None:
    allowed = {line[1:].rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.startswith("!")}
    copied = copied_from_context()
    assert copied <= allowed, f"excluded by .dockerignore: {copied - allowed}"
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {pattern.rstrip("*") for pattern in include}
    assert packages <= copied, f"packages the image lacks: {packages - copied}"
    assert {"pyproject.toml", "README.md", "deploy/scripts", "clients/python"} <= copied


# --------------------------------------------------------------------------- compose


@pytest.fixture(scope="module")
def compose() -> Obj:
    return dict(yaml.safe_load((COMPOSE / "compose.yaml").read_text()))


def test_compose_matches_the_compose_specification() -> None:
    """check-jsonschema with the Compose Specification schema it ships (formats checked too)."""
    if importlib.util.find_spec("check_jsonschema") is None:
        checker_missing("check-jsonschema is not installed: compose schema not checked "
                        "(pip install -e '.[test]')")
    result = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema",
                             "vendor.compose-spec", str(COMPOSE / "compose.yaml")],
                            capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_runs_the_whole_stack(compose: Obj) -> None:
    services = compose["services"]
    expected = {"postgres", "kafka-1", "kafka-2", "kafka-3", "kafka-init", "migrate", "api-1",
                "api-2", "lb", "confirm-worker", "recovery-worker", "report", "retention"}
    assert expected <= services.keys()
    assert services["migrate"]["command"] == ["migrate"]
    for name, service in services.items():
        if "build" in service and name != "migrate":
            condition = service["depends_on"]["migrate"]["condition"]
            assert condition == "service_completed_successfully", name
        if "build" in service:
            assert service["build"]["target"] in dockerfile_stages(), name
    assert {"api-1", "api-2"} <= services["lb"]["depends_on"].keys()
    nginx = (COMPOSE / "nginx.conf").read_text()
    assert "server api-1:8000" in nginx and "server api-2:8000" in nginx


def test_compose_api_runs_with_overload_protection(compose: Obj) -> None:
    for name in ("api-1", "api-2"):
        environment = compose["services"][name]["environment"]
        assert environment["RMS_ADMISSION_ENABLED"] == "true", name


def test_compose_kafka_is_kraft_with_durable_defaults(compose: Obj) -> None:
    nodes = [s for n, s in compose["services"].items() if n.startswith("kafka-") and n[-1].isdigit()]
    assert len(nodes) == 3
    for node in nodes:
        assert node["image"].startswith("apache/kafka:")
        env = node["environment"]
        assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
        assert env["KAFKA_MIN_INSYNC_REPLICAS"] == "2"
        assert env["KAFKA_DEFAULT_REPLICATION_FACTOR"] == "3"
    init = compose["services"]["kafka-init"]["environment"]
    assert (init["TOPIC_REPLICATION_FACTOR"], init["TOPIC_MIN_INSYNC_REPLICAS"]) == ("3", "2")


def test_compose_secrets_come_from_the_env_file(compose: Obj) -> None:
    required = set(re.findall(r"\$\{(\w+):\?", (COMPOSE / "compose.yaml").read_text()))
    assert {"POSTGRES_PASSWORD", "RMS_ADMIN_TOKEN"} <= required
    assert required <= env_file(COMPOSE / ".env.example").keys()
    for service in compose["services"].values():
        for key, value in dict(service.get("environment", {})).items():
            if re.search(r"PASSWORD|TOKEN|SECRET", key):
                assert re.fullmatch(r"\$\{\w+:\?[^}]*\}", str(value)), f"{key} is a literal"


def test_third_party_images_are_pinned(compose: Obj) -> None:
    for name, service in compose["services"].items():
        if "build" in service:
            continue
        tag = service["image"].partition(":")[2]
        assert re.match(r"v?\d+\.\d+", tag) and tag != "latest", f"{name}: {service['image']}"


def test_acks_all_wherever_acks_are_set(compose: Obj) -> None:
    sources = [env_file(K8S / "base" / "config.env"), env_file(SYSTEMD / "rms.env.example"),
               dict(compose["x-rms-environment"])]
    for source in sources:
        assert source["RMS_KAFKA_ACKS"] == "all"


def test_compose_postgres_uses_the_documented_settings(compose: Obj) -> None:
    command = compose["services"]["postgres"]["command"]
    flags = dict(value.split("=", 1) for value in command[2::2])
    assert command[0] == "postgres" and set(command[1::2]) == {"-c"}
    conf = {key.strip(): value.split("#")[0].strip() for key, value in
            (line.split("=", 1) for line in (DEPLOY / "postgres" / "rms.conf").read_text()
             .splitlines() if "=" in line and not line.startswith("#"))}
    assert flags == conf
    assert conf["synchronous_commit"] == "on"


# --------------------------------------------------------------------------- alerts, metrics


def alert_rules() -> list[Obj]:
    return list(yaml.safe_load(ALERT_RULES.read_text())["groups"][0]["rules"])


def runbook_anchor(rule: Obj) -> str:
    """The heading an alert rule's runbook annotation names on the alerts page."""
    runbook = str(rule["annotations"]["runbook"])
    page = f"{RUNBOOKS.relative_to(ROOT)}#"
    assert runbook.startswith(page), f"{rule['alert']}: runbook {runbook} is not on {page}"
    return runbook.removeprefix(page)


def doc_anchors() -> set[str]:
    """The heading ids of the alerts page (the runbooks)."""
    headings = re.findall(r"^#+\s+(.+)$", RUNBOOKS.read_text(), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_alert_rule_copies_are_identical() -> None:
    copy = K8S / "base" / "monitoring" / "rms-alerts.yml"
    assert copy.read_text() == ALERT_RULES.read_text()


def test_alerts_use_known_metrics_and_documented_runbooks() -> None:
    used: set[str] = set()
    for rule in alert_rules():
        names = set(re.findall(r"\brms_[a-z_]+", rule["expr"]))
        assert names <= METRICS.keys(), f"{rule['alert']} uses unknown {names - METRICS.keys()}"
        used |= names
        anchor = runbook_anchor(rule)
        assert anchor in doc_anchors(), f"{rule['alert']}: no section #{anchor}"
    assert {"rms_dead_letters_total", "rms_oldest_pending_send_age_seconds",
            "rms_checks_total"} <= used


def documented_metrics() -> dict[str, str]:
    page = (OPERATIONS / "monitoring.md").read_text()
    section = page.split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\|\s*`(rms_[a-z_]+)`\s*\|\s*(\w+)\s*\|", section, re.MULTILINE)
    return dict(rows)


def defined_metrics() -> dict[str, str]:
    """The metrics rms/metrics.py defines (the one home of every metric), name -> type."""
    source = (ROOT / "rms" / "metrics.py").read_text()
    found = re.findall(r"\b(Counter|Gauge|Histogram)\(\s*\"(rms_[a-z_]+)\"", source)
    # a collector's families (figures read from the database at each scrape); a counter
    # family is exposed with the _total suffix
    families = re.findall(r"\b(Counter|Gauge)MetricFamily\(\s*\"(rms_[a-z_]+)\"", source)
    return {name: kind.lower() for kind, name in found} | {
        name + ("_total" if kind == "Counter" else ""): kind.lower() for kind, name in families}


def test_operations_guide_documents_the_metrics_the_code_defines() -> None:
    documented = documented_metrics()
    assert METRICS.items() <= documented.items(), "the alerting metrics must be documented"
    assert documented == defined_metrics()


def test_the_code_defines_the_alerting_metrics() -> None:
    assert METRICS.items() <= defined_metrics().items()


def alert_names() -> list[str]:
    return [rule["alert"] for rule in alert_rules() if "alert" in rule]


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    found = shutil.which("promtool")
    if found is None:
        checker_missing("promtool is not installed: rules not checked "
                        "(bash scripts/system-deps.sh installs Debian's prometheus)")
    return subprocess.run([found, *args], cwd=ALERT_RULES.parent, capture_output=True,
                          text=True, check=False, timeout=60)


def test_alert_rules_pass_promtool() -> None:
    result = promtool("check", "rules", "--lint=all", "--lint-fatal", ALERT_RULES.name)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_test_of_firing_and_of_staying_quiet() -> None:
    """Each alert's file tests that alert alone, both when it fires and when it must not."""
    assert sorted(p.name for p in ALERT_TESTS.glob("*")) == sorted(
        f"{name}.test.yml" for name in alert_names())
    for name in alert_names():
        spec = yaml.safe_load((ALERT_TESTS / f"{name}.test.yml").read_text())
        assert spec["rule_files"] == [f"../{ALERT_RULES.name}"], name
        cases = [case for test in spec["tests"] for case in test["alert_rule_test"]]
        assert {case["alertname"] for case in cases} == {name}
        assert any(case["exp_alerts"] for case in cases), f"{name}: never shown firing"
        assert any(not case["exp_alerts"] for case in cases), f"{name}: never shown quiet"


@pytest.mark.parametrize("alert", alert_names())
def test_alert_fires_on_its_condition_only(alert: str) -> None:
    result = promtool("test", "rules", str(Path(ALERT_TESTS.name) / f"{alert}.test.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


# --------------------------------------------------------------------------- systemd, scripts


def rms_executable() -> Path | None:
    beside = Path(sys.executable).with_name("rms")
    found = beside if beside.is_file() else shutil.which("rms")
    return Path(found) if found else None


def test_systemd_units_verify(tmp_path: Path) -> None:
    analyze, rms = shutil.which("systemd-analyze"), rms_executable()
    if analyze is None or rms is None:
        pytest.skip("systemd-analyze or the rms executable is missing: units not verified")
    for unit in SYSTEMD.glob("rms*"):
        if unit.suffix in {".service", ".timer", ".target"}:
            text = unit.read_text().replace("/opt/rms/.venv/bin/rms", str(rms))
            (tmp_path / unit.name).write_text(text.replace("/opt/rms/src/", f"{ROOT}/"))
    names = [f"./{p.name.replace('@.', '@8000.')}" for p in sorted(tmp_path.iterdir())]
    result = subprocess.run([analyze, "verify", "--man=no", *names], cwd=tmp_path,
                            capture_output=True, text=True, check=False, timeout=60)
    ours = [line for line in result.stderr.splitlines() if "rms" in line]  # not the host's
    assert result.returncode == 0 and not ours, result.stderr


def test_systemd_runs_every_script_it_names() -> None:
    for unit in SYSTEMD.glob("*.service"):
        for line in unit.read_text().splitlines():
            if line.startswith("ExecStart=/opt/rms/src/"):
                assert (ROOT / line.split()[0].removeprefix("ExecStart=/opt/rms/src/")).is_file()


@pytest.mark.parametrize("script", sorted([*SCRIPTS.iterdir(), DEPLOY / "kafka" / "create-topics.sh"]),
                         ids=lambda p: p.name)
def test_shell_scripts_are_clean(script: Path) -> None:
    shell = "bash" if "bash" in script.read_text().splitlines()[0] else "sh"
    syntax = subprocess.run([shell, "-n", str(script)], capture_output=True, text=True, check=False)
    assert syntax.returncode == 0, syntax.stderr
    if script.parent == SCRIPTS:
        assert os.access(script, os.X_OK), f"{script} is not executable"
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (apt-get install shellcheck)")
    result = subprocess.run([shellcheck, str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


def stub_rms(directory: Path, exit_code: int = 0) -> Path:
    """An ``rms`` that records its arguments, one per line, in ``directory/rms.args``."""
    directory.mkdir(parents=True, exist_ok=True)
    stub = directory / "rms"
    stub.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{directory}/rms.args"\nexit {exit_code}\n')
    stub.chmod(0o755)
    return directory / "rms.args"


def test_daily_report_script_runs_rms_report_for_one_day(tmp_path: Path) -> None:
    recorded = stub_rms(tmp_path / "bin")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
           "REPORT_DAY": "2026-02-28", "REPORT_DIR": str(tmp_path / "reports")}
    subprocess.run([str(SCRIPTS / "rms-report-daily"), "--driver-memory", "2g"], env=env,
                   check=True, timeout=30)
    args = recorded.read_text().splitlines()
    assert args == ["report", "--since", "2026-02-28", "--until", "2026-03-01", "--out",
                    f"{tmp_path}/reports/2026-02-28", "--driver-memory", "2g"]
    parse_cli(args[0], args[1:])


# --------------------------------------------------------------------------- retention


SEED = """
INSERT INTO apps (name, api_key_hash, signing_secret) VALUES ('shop', 'hash', 'secret');
INSERT INTO messages (message_id, app, topic, payload, state, dead, check_after_seconds,
                      max_checks, ack_timeout_seconds, max_deliveries, created_at, done_at,
                      deleted_at)
SELECT id, 'shop', 'orders', '{}', state, dead, 10, 15, 60, 6, now() - created,
       CASE WHEN state = 'done' THEN now() - finished END,
       CASE WHEN state = 'deleted' THEN now() - finished END
FROM (VALUES
    ('old-done-1', 'done', false, interval '40 days', interval '35 days'),
    ('old-done-2', 'done', false, interval '40 days', interval '31 days'),
    ('old-done-3', 'done', false, interval '50 days', interval '49 days'),
    ('old-deleted', 'deleted', false, interval '40 days', interval '32 days'),
    ('recently-done', 'done', false, interval '40 days', interval '2 days'),
    ('old-dead-sent', 'sent', true, interval '40 days', NULL),
    ('old-pending', 'pending-send', false, interval '40 days', NULL),
    ('new-done', 'done', false, interval '1 day', interval '1 hour')
) AS seed (id, state, dead, created, finished);
INSERT INTO message_events (message_id, at, event, actor)
SELECT message_id, created_at, 'prepared', 'shop' FROM messages;
INSERT INTO message_events (message_id, at, event, actor)
VALUES ('vanished', now() - interval '60 days', 'acked', 'shop'),
       ('vanished-recently', now() - interval '1 day', 'acked', 'shop');
"""
KEPT = ["new-done", "old-dead-sent", "old-pending", "recently-done"]


@pytest.fixture
def seeded(postgres: EmbeddedPostgres, database_url: str) -> tuple[EmbeddedPostgres, str]:
    name = database_url.rsplit("/", 1)[1]
    postgres.psql(SEED, name)
    return postgres, name


def run_retention(database_url: str, k8s_objects: list[Obj], **env: str
                  ) -> subprocess.CompletedProcess[str]:
    """The CronJob's command line, with the rms-retention ConfigMap, for real."""
    cronjob = next(c for c in by_kind(k8s_objects, "CronJob") if component(c) == "retention")
    args = containers(cronjob)[0]["args"]
    environment = {**os.environ, **env_file(K8S / "base" / "retention.env"),
                   "RMS_DATABASE_URL": database_url, "RMS_RETENTION_BATCH_SIZE": "2", **env}
    return subprocess.run([sys.executable, "-m", "rms.cli", *args], env=environment,
                          capture_output=True, text=True, check=False, timeout=60)


def rows(server: EmbeddedPostgres, name: str, sql: str) -> list[str]:
    return server.psql(sql, name).split()


def test_retention_removes_only_finished_messages_past_the_age(
        seeded: tuple[EmbeddedPostgres, str], database_url: str, k8s_objects: list[Obj]) -> None:
    server, name = seeded
    result = run_retention(database_url, k8s_objects)
    assert result.returncode == 0, result.stderr
    assert rows(server, name, "SELECT message_id FROM messages ORDER BY 1") == KEPT
    events = rows(server, name, "SELECT DISTINCT message_id FROM message_events ORDER BY 1")
    assert events == sorted([*KEPT, "vanished-recently"])
    assert "4 messages and 5 events" in result.stdout
    assert "1 event of messages already gone" in result.stdout


def test_retention_archives_with_the_documented_setting(
        seeded: tuple[EmbeddedPostgres, str], database_url: str, k8s_objects: list[Obj],
        tmp_path: Path) -> None:
    server, name = seeded
    archive = tmp_path / "archive"
    done = run_retention(database_url, k8s_objects, RMS_RETENTION_ARCHIVE_DIR=str(archive))
    assert done.returncode == 0, done.stderr
    assert rows(server, name, "SELECT message_id FROM messages ORDER BY 1") == KEPT
    assert len(list(archive.glob("day=*/_export.json"))) == 3  # 40, 50 days ago; the orphan


def test_retention_refuses_bad_settings(k8s_objects: list[Obj]) -> None:
    result = run_retention("postgresql://nobody@db.invalid/rms", k8s_objects,
                           RMS_RETENTION_OLDER_THAN="0")
    assert result.returncode == 2 and "RMS_RETENTION_OLDER_THAN" in result.stderr
