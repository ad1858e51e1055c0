"""``make dist``: every RMS artifact into ``dist/``, each with its CycloneDX SBOM.

    dist/rms_server-V-py3-none-any.whl, rms_server-V.tar.gz     the server (PyPI: rms-server)
    dist/rms_client-V-py3-none-any.whl, rms_client-V.tar.gz     the Python client (rms-client)
    dist/maven/io/github/rms-dev/rms-client/V/                   jar, sources, Javadoc, POM (a
                                                                 file:// Maven repository)
    dist/rms-client-V.tgz                                        the npm package (rms-client)
    dist/goproxy/github.com/rms-dev/rms/clients/go/@v/           the Go module (GOPROXY=file://)
    dist/rms-server-V.oci.tar                                    the server image (release/image.py)
    dist/sbom/*.cdx.json                                         one SBOM per artifact

    python -m release.dist [--skip-image]
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import venv
from datetime import UTC, datetime
from pathlib import Path

from release import goproxy, image
from release.version import ROOT, mismatches, release

DIST = ROOT / "dist"
SBOM = DIST / "sbom"
JAVA = ROOT / "clients" / "java"
TYPESCRIPT = ROOT / "clients" / "typescript"
GROUP_PATH = Path("io/github/rms-dev")


def run(command: list[str], cwd: Path = ROOT, env: dict[str, str] | None = None) -> None:
    print(f"dist: {' '.join(command)}", flush=True)
    subprocess.run(command, cwd=cwd, env=env, check=True)


def python_distributions(version: str, work: Path) -> None:
    """The wheels and sdists (``python -m build``), and an SBOM of each as installed."""
    for project in (ROOT / "clients" / "python", ROOT):
        run([sys.executable, "-m", "build", "--outdir", str(DIST), str(project)])
    for name, wheel in (("rms-client", "rms_client"), ("rms-server", "rms_server")):
        environment = work / f"sbom-{name}"
        venv.create(environment, with_pip=True)
        python = str(environment / "bin" / "python")
        run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "--find-links", str(DIST), str(DIST / f"{wheel}-{version}-py3-none-any.whl")])
        run([sys.executable, "-m", "cyclonedx_py", "environment", "--output-format", "JSON",
             "--output-file", str(SBOM / f"{name}-{version}.cdx.json"), python])


def java_library(version: str) -> None:
    """The jar, sources and Javadoc jars (the ``release`` profile) laid out as a Maven
    repository with the POM and the checksums a repository carries."""
    run(["mvn", "-q", "-B", "-P", "release", "-DskipTests", "clean", "package"], cwd=JAVA)
    folder = DIST / "maven" / GROUP_PATH / "rms-client" / version
    folder.mkdir(parents=True, exist_ok=True)
    built = {f"rms-client-{version}{suffix}.jar": JAVA / "target" / f"rms-client-{version}{suffix}.jar"
             for suffix in ("", "-sources", "-javadoc")}
    built[f"rms-client-{version}.pom"] = JAVA / "pom.xml"
    for name, source in built.items():
        shutil.copyfile(source, folder / name)
        for algorithm in ("md5", "sha1", "sha256"):
            digest = hashlib.new(algorithm, source.read_bytes()).hexdigest()
            (folder / f"{name}.{algorithm}").write_text(digest)
    shutil.copyfile(JAVA / "target" / "rms-client-sbom.json",
                    SBOM / f"rms-client-java-{version}.cdx.json")


def npm_package(version: str) -> None:
    """``npm pack`` (its prepack builds), and ``npm sbom`` of what an install brings."""
    run(["npm", "ci", "--no-audit", "--no-fund"], cwd=TYPESCRIPT)
    run(["npm", "pack", "--pack-destination", str(DIST)], cwd=TYPESCRIPT)
    sbom = subprocess.run(["npm", "sbom", "--sbom-format", "cyclonedx", "--omit", "dev"],
                          cwd=TYPESCRIPT, check=True, capture_output=True, text=True).stdout
    (SBOM / f"rms-client-npm-{version}.cdx.json").write_text(sbom)


def go_module(version: str) -> None:
    """The module-proxy layout, and cyclonedx-gomod's SBOM of the module."""
    module_root = ROOT / "clients" / "go"
    released = datetime.fromtimestamp(int(subprocess.run(
        ["git", "log", "-1", "--format=%ct"], cwd=ROOT, check=True, capture_output=True,
        text=True).stdout.strip() or "0"), UTC)
    goproxy.write_layout(module_root, f"v{version}", DIST / "goproxy", released)
    run(["go", "run", "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0", "mod",
         "-json", "-licenses", "-output", str(SBOM / f"rms-client-go-{version}.cdx.json"),
         str(module_root)])


def main(arguments: list[str]) -> int:
    wrong = mismatches()
    if wrong:
        print("dist: the version copies differ from VERSION (python -m release.version --write):",
              *wrong, sep="\n  ", file=sys.stderr)
        return 1
    version = release()
    shutil.rmtree(DIST, ignore_errors=True)
    SBOM.mkdir(parents=True)
    work = ROOT / "build" / "release"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    python_distributions(version, work)
    java_library(version)
    npm_package(version)
    go_module(version)
    if "--skip-image" not in arguments:
        image.build(version, DIST, SBOM)
    for path in sorted(DIST.rglob("*")):
        if path.is_file() and path.suffix in {".whl", ".gz", ".tgz", ".jar", ".pom", ".zip", ".tar"}:
            print(f"{path.stat().st_size:>12,}  {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
