"""What make dist wrote: every artifact with its SBOM (CycloneDX, made by each ecosystem's own
tool), and the metadata a registry asks for (the licence, the version, Maven Central's fields)."""

from __future__ import annotations

import hashlib
import json
import re
import tarfile
import xml.etree.ElementTree as ET
import zipfile

import pytest

from tests.system.release.conftest import ROOT, VERSION, artifact

SBOMS = ("rms-server", "rms-client", "rms-client-java", "rms-client-npm", "rms-client-go",
         "rms-server-image", "rms-report-image")
POM = "{http://maven.apache.org/POM/4.0.0}"


@pytest.mark.parametrize("name", SBOMS)
def test_each_artifact_has_a_cyclonedx_sbom(name: str) -> None:
    sbom = json.loads(artifact(f"sbom/{name}-{VERSION}.cdx.json").read_text())
    assert sbom["bomFormat"] == "CycloneDX" and sbom["components"], name


@pytest.mark.parametrize("wheel", ["rms_server", "rms_client"])
def test_the_wheels_declare_the_licence_and_ship_it(wheel: str) -> None:
    with zipfile.ZipFile(artifact(f"{wheel}-{VERSION}-py3-none-any.whl")) as archive:
        metadata = archive.read(f"{wheel}-{VERSION}.dist-info/METADATA").decode()
        names = archive.namelist()
    assert "License-Expression: Apache-2.0" in metadata
    assert {f"{wheel}-{VERSION}.dist-info/licenses/{name}" for name in ("LICENSE", "NOTICE")} <= set(names)


def test_the_pom_carries_what_maven_central_requires() -> None:
    folder = f"maven/io/github/rms-dev/rms-client/{VERSION}"
    pom = ET.parse(artifact(f"{folder}/rms-client-{VERSION}.pom")).getroot()  # noqa: S314  (our own file)
    assert pom.findtext(f"{POM}version") == VERSION
    for field in ("name", "description", "url", "licenses/{P}license/{P}name", "scm/{P}url",
                  "developers/{P}developer/{P}name"):
        assert pom.findtext(POM + field.replace("{P}", POM)), field
    assert pom.findtext(f"{POM}licenses/{POM}license/{POM}name") == "Apache-2.0"
    for suffix in ("", "-sources", "-javadoc"):
        assert artifact(f"{folder}/rms-client-{VERSION}{suffix}.jar").stat().st_size > 0
    kafka = [d for d in pom.iter(f"{POM}dependency") if d.findtext(f"{POM}artifactId") == "kafka-clients"]
    assert [d.findtext(f"{POM}optional") for d in kafka] == ["true"]


def test_the_npm_package_is_public_and_licensed() -> None:
    with tarfile.open(artifact(f"rms-client-{VERSION}.tgz")) as archive:
        manifest = json.loads(archive.extractfile("package/package.json").read())  # type: ignore[union-attr]
        names = archive.getnames()
    assert (manifest["name"], manifest["version"], manifest["license"]) == (
        "rms-client", VERSION, "Apache-2.0")
    assert "private" not in manifest
    assert {"package/LICENSE", "package/NOTICE", "package/dist/index.d.ts"} <= set(names)


def test_the_go_layout_lists_the_release() -> None:
    folder = "goproxy/github.com/rms-dev/rms/clients/go/@v"
    assert artifact(f"{folder}/list").read_text().split() == [f"v{VERSION}"]
    assert json.loads(artifact(f"{folder}/v{VERSION}.info").read_text())["Version"] == f"v{VERSION}"
    with zipfile.ZipFile(artifact(f"{folder}/v{VERSION}.zip")) as archive:
        assert f"github.com/rms-dev/rms/clients/go@v{VERSION}/LICENSE" in archive.namelist()


# each SBOM's subject: (SBOM name, the artifact it describes, its name and version there)
SUBJECTS = {
    "rms-server": (f"rms_server-{VERSION}-py3-none-any.whl", "rms-server", VERSION),
    "rms-client": (f"rms_client-{VERSION}-py3-none-any.whl", "rms-client", VERSION),
    "rms-client-java": (f"maven/io/github/rms-dev/rms-client/{VERSION}/rms-client-{VERSION}.jar",
                        "rms-client", VERSION),
    "rms-client-npm": (f"rms-client-{VERSION}.tgz", "rms-client", VERSION),
    "rms-client-go": (f"goproxy/github.com/rms-dev/rms/clients/go/@v/v{VERSION}.zip",
                      "github.com/rms-dev/rms/clients/go", f"v{VERSION}"),
    "rms-server-image": (f"rms-server-{VERSION}.oci.tar", "rms-server", VERSION),
    "rms-report-image": (f"rms-report-{VERSION}.oci.tar", "rms-report", VERSION),
}


@pytest.mark.parametrize("name", sorted(SUBJECTS))
def test_each_sbom_names_its_artifact_with_the_files_hash(name: str) -> None:
    path, subject, version = SUBJECTS[name]
    sbom = json.loads(artifact(f"sbom/{name}-{VERSION}.cdx.json").read_text())
    component = sbom["metadata"]["component"]
    assert (component["name"], component["version"]) == (subject, version)
    digest = hashlib.sha256(artifact(path).read_bytes()).hexdigest()
    assert {"alg": "SHA-256", "content": digest} in component["hashes"]
    refs = {entry.get("bom-ref") for entry in sbom["components"]}
    assert component["bom-ref"] not in refs  # the subject is not listed as its own component


@pytest.mark.parametrize("name", ["rms-server", "rms-client"])
def test_the_python_sboms_hash_every_component(name: str) -> None:
    sbom = json.loads(artifact(f"sbom/{name}-{VERSION}.cdx.json").read_text())
    unhashed = [entry["name"] for entry in sbom["components"] if not entry.get("hashes")]
    assert unhashed == []


def test_the_npm_sbom_lists_what_an_install_brings() -> None:
    sbom = json.loads(artifact(f"sbom/rms-client-npm-{VERSION}.cdx.json").read_text())
    names = {entry.get("group", "") + ("/" if entry.get("group") else "") + entry["name"]
             for entry in sbom["components"]}
    assert {"@types/node", "undici-types", "@opentelemetry/api", "pg", "kafkajs",
            "standardwebhooks"} <= names, names
    assert "typescript" not in names


@pytest.mark.parametrize(("image", "packages"), [
    ("rms-server-image", {"tini", "python3.11", "libc6", "ca-certificates"}),
    ("rms-report-image", {"tini", "openjdk-17-jre-headless", "libpostgresql-jdbc-java",
                          "postgresql-client-15"})])
def test_the_image_sboms_list_their_debian_packages(image: str, packages: set[str]) -> None:
    sbom = json.loads(artifact(f"sbom/{image}-{VERSION}.cdx.json").read_text())
    debian = {entry["name"]: entry for entry in sbom["components"]
              if entry.get("purl", "").startswith("pkg:deb/debian/")}
    assert packages <= set(debian), sorted(debian)
    assert len(debian) > 80
    assert all(f"@{entry['version']}?arch=" in entry["purl"] for entry in debian.values())
    python = {entry["name"] for entry in sbom["components"] if entry["name"] not in debian}
    assert {"fastapi", "uvicorn", "rms-client", "rms-server"} <= python


def test_the_server_image_runs_the_tested_versions() -> None:
    pins = {line.split("==")[0]: line.split("==")[1]
            for line in artifact(f"rms-server-{VERSION}-constraints.txt").read_text().splitlines()
            if "==" in line and not line.startswith("#")}
    sbom = json.loads(artifact(f"sbom/rms-server-image-{VERSION}.cdx.json").read_text())
    installed = {entry["name"].lower().replace("_", "-").replace(".", "-"): entry["version"]
                 for entry in sbom["components"] if entry.get("purl", "").startswith("pkg:pypi/")}
    assert {name: installed.get(name) for name in pins} == pins


def test_the_go_layout_serves_every_module_the_client_needs_with_checksums() -> None:
    layout = artifact("goproxy")
    required = re.findall(r"^\s+(\S+) (v\S+)", (ROOT / "clients" / "go" / "go.mod").read_text(),
                          re.MULTILINE)
    assert len(required) > 10
    for module, version in required:
        escaped = re.sub(r"[A-Z]", lambda match: "!" + match.group().lower(), module)
        assert (layout / escaped / "@v" / f"{version}.mod").is_file(), module
    sums = artifact(f"goproxy/rms-client-go-{VERSION}.go.sum").read_text()
    assert f"github.com/rms-dev/rms/clients/go v{VERSION} h1:" in sums
    assert all(f"{module} {version}/go.mod h1:" in sums for module, version in required)
