"""``make dist``: every RMS artifact into ``dist/``, each with its CycloneDX SBOM.

    dist/rms_server-V-py3-none-any.whl, rms_server-V.tar.gz     the server (PyPI: rms-server)
    dist/rms_client-V-py3-none-any.whl, rms_client-V.tar.gz     the Python client (rms-client)
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

import hashlib
import shutil
import subprocess
import sys
import venv
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from release import goproxy, image
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


def python_distribution(name: str, project: Path, version: str, work: Path) -> None:
    """The wheel and sdist of ``project`` (``python -m build``), and an SBOM of the wheel as
    installed."""
    run([sys.executable, "-m", "build", "--outdir", str(DIST), str(project)])
    wheel = name.replace("-", "_")
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
    goproxy.write_layout(module_root, f"v{version}", DIST / "goproxy", go_released())
    run(["go", "run", "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0", "mod",
         "-json", "-licenses", "-output", str(SBOM / f"rms-client-go-{version}.cdx.json"),
         str(module_root)])


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
         partial(python_distribution, "rms-client", ROOT / "clients" / "python", version, work)),
        (Step("rms-server-python", (*base, *SERVER)),
         partial(python_distribution, "rms-server", ROOT, version, work)),
        (Step("rms-client-java", (*base, "clients/java")), partial(java_library, version)),
        (Step("rms-client-npm", (*base, "clients/typescript")), partial(npm_package, version)),
        (Step("rms-client-go", (*base, "clients/go"), (go_released().isoformat(),)),
         partial(go_module, version)),
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
