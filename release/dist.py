"""``make dist``: every RMS artifact into ``dist/``, each with its CycloneDX SBOM.

    dist/rms_server-V-py3-none-any.whl, rms_server-V.tar.gz     the server (PyPI: rms-server)
    dist/rms_client-V-py3-none-any.whl, rms_client-V.tar.gz     the Python client (rms-client)
    dist/rms-{server,client}-V-{requirements,dependencies}.txt   their install by hash
    dist/rms-server-V-constraints.txt                            what the server is tested with
                                                                 (release/wheels.py)
    dist/maven/io/github/rms-dev/rms-client/V/                   jar, sources, Javadoc, POM (a
                                                                 file:// Maven repository)
    dist/rms-client-V.tgz                                        the npm package (rms-client)
    dist/goproxy/github.com/rms-dev/rms/clients/go/@v/           the Go module (GOPROXY=file://)
    dist/rms-server-V.oci.tar                                    the server image (release/image.py)
    dist/rms-report-V.oci.tar                                    the batch image: report, export,
                                                                 retention (Spark, a JRE, psql)
    dist/sbom/*.cdx.json                                         one SBOM per artifact

    python -m release.dist [--skip-image]

Each artifact is built only when what goes into it changed (:mod:`release.cache`); an
unchanged one is copied from the cache.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from release import goproxy, image, sbom, wheels
from release.cache import Step, produce
from release.version import ROOT, mismatches, release

DIST = ROOT / "dist"
SBOM = DIST / "sbom"
JAVA = ROOT / "clients" / "java"
TYPESCRIPT = ROOT / "clients" / "typescript"
GROUP_PATH = Path("io/github/rms-dev")


def run(command: list[str], cwd: Path = ROOT, env: dict[str, str] | None = None) -> None:
    print(f"dist: {' '.join(command)}", flush=True)
    subprocess.run(command, cwd=cwd, env=env, check=True)


# the folders each artifact is built from (besides VERSION and the recipe, release/)
SERVER_PACKAGES = ("rms", "message_service", "confirm_service", "recovery_service", "spark",
                   "history", "bench")
PYTHON_CLIENT = ("clients/python",)
SERVER = (*SERVER_PACKAGES, "pyproject.toml", "README.md", "LICENSE", "NOTICE", *PYTHON_CLIENT)
# what the Dockerfile's build context holds (.dockerignore's allow-list)
IMAGE = ("Dockerfile", ".dockerignore", *SERVER, "deploy/scripts", "release/constraints.txt")


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
    output = SBOM / f"rms-client-java-{version}.cdx.json"
    shutil.copyfile(JAVA / "target" / "rms-client-sbom.json", output)
    # cyclonedx-maven names the jar without its hashes: those of the jar the repository holds
    sbom.rewrite(output, sbom.describe(sbom.load(output), sbom.root(
        "library", "rms-client", version,
        f"pkg:maven/io.github.rms-dev/rms-client@{version}?type=jar",
        folder / f"rms-client-{version}.jar", group="io.github.rms-dev")))


def npm_package(version: str, work: Path) -> None:
    """``npm pack`` (its prepack builds), its integrity (npm's SHA-512), and ``npm sbom`` of what
    the README's install brings: the tarball installed with its peer dependency in a project
    of its own, so the SBOM lists every package a user's install holds."""
    run(["npm", "ci", "--no-audit", "--no-fund"], cwd=TYPESCRIPT)
    run(["npm", "pack", "--pack-destination", str(DIST)], cwd=TYPESCRIPT)
    tarball = DIST / f"rms-client-{version}.tgz"
    digest = base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
    (DIST / f"rms-client-{version}.tgz.integrity").write_text(f"sha512-{digest}\n")
    project = work / "npm-sbom"
    project.mkdir(parents=True)
    (project / "package.json").write_text(json.dumps({"name": "rms-client-sbom", "version": "0.0.0",
                                                          "private": True}))
    run(["npm", "install", "--no-audit", "--no-fund", str(tarball), "@opentelemetry/api@^1.9.0"],
        cwd=project)
    listed = subprocess.run(["npm", "sbom", "--sbom-format", "cyclonedx", "--omit", "dev"],
                            cwd=project, check=True, capture_output=True, text=True).stdout
    output = SBOM / f"rms-client-npm-{version}.cdx.json"
    output.write_text(listed)
    sbom.rewrite(output, sbom.describe(sbom.load(output), sbom.root(
        "library", "rms-client", version, f"pkg:npm/rms-client@{version}", tarball)))


def go_module(version: str, work: Path) -> None:
    """The module-proxy layout with every module it needs, their ``go.sum`` lines, and
    cyclonedx-gomod's SBOM of the module."""
    module_root = ROOT / "clients" / "go"
    goproxy.write_layout(module_root, f"v{version}", DIST / "goproxy", go_released())
    needed = goproxy.add_dependencies(module_root, DIST / "goproxy", work)
    (DIST / "goproxy" / f"rms-client-go-{version}.go.sum").write_text(
        goproxy.go_sum(module_root, f"v{version}", DIST / "goproxy", work, needed))
    output = SBOM / f"rms-client-go-{version}.cdx.json"
    run(["go", "run", "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0", "mod",
         "-json", "-licenses", "-output", str(output), str(module_root)])
    module = goproxy.module_path(module_root)
    # the module as the layout serves it: the release's version and the zip's hashes
    sbom.rewrite(output, sbom.describe(sbom.load(output), sbom.root(
        "library", module, f"v{version}", f"pkg:golang/{module}@v{version}",
        DIST / "goproxy" / module / "@v" / f"v{version}.zip")))


def go_released() -> datetime:
    """The module's release time in the proxy layout: the last commit that changed the Go
    client (so the layout, and its cache key, change only with the module)."""
    seconds = subprocess.run(["git", "log", "-1", "--format=%ct", "--", "clients/go"], cwd=ROOT,
                             check=True, capture_output=True, text=True).stdout.strip()
    return datetime.fromtimestamp(int(seconds or "0"), UTC)


def steps(version: str, work: Path, with_image: bool) -> list[tuple[Step, Callable[[], object]]]:
    """Every artifact: what it is built from, and how. The server's SBOM installs the client's
    wheel from ``dist/``, so the client comes first."""
    base = ("VERSION",)
    made: list[tuple[Step, Callable[[], object]]] = [
        (Step("rms-client-python", (*base, *PYTHON_CLIENT)),
         partial(wheels.distribution, "rms-client", ROOT / "clients" / "python", version, work,
                 DIST, SBOM)),
        (Step("rms-server-python", (*base, *SERVER)),
         partial(wheels.distribution, "rms-server", ROOT, version, work, DIST, SBOM)),
        (Step("rms-client-java", (*base, "clients/java")), partial(java_library, version)),
        (Step("rms-client-npm", (*base, "clients/typescript")), partial(npm_package, version, work)),
        (Step("rms-client-go", (*base, "clients/go"), (go_released().isoformat(),)),
         partial(go_module, version, work)),
    ]
    if with_image:
        for target in image.TARGETS:
            made.append((Step(f"{target.name}-image", (*base, *IMAGE), image.BASE_INPUTS),
                         partial(image.build, target, version, DIST, SBOM)))
    return made


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
    for step, build in steps(version, work, "--skip-image" not in arguments):
        produce(step, DIST, build)
    for path in sorted(DIST.rglob("*")):
        if path.is_file() and path.suffix in {".whl", ".gz", ".tgz", ".jar", ".pom", ".zip", ".tar"}:
            print(f"{path.stat().st_size:>12,}  {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
