"""The release's images, built where no container registry answers: ``rms-server`` (the
Dockerfile's default ``runtime`` stage: API, workers, migrations) and ``rms-report`` (its
``report`` stage: ``rms report``, ``rms export`` and ``rms retention run`` with Spark, a JRE and
psql), which the Kubernetes manifests and the Compose file run.

The Dockerfile's base is ``python:3.11.14-slim-bookworm`` from a registry. Here the base is a
Debian bookworm root file system that ``mmdebstrap`` bootstraps from the Debian mirror (with
Debian's Python 3.11, ``python`` and ``venv``), imported into buildah once and passed as the
``PYTHON_IMAGE`` build argument; the Dockerfile itself is the one a registry user builds.
The bootstrapped tarball and buildah's layers are cached (``~/.cache/rms/release``, buildah's
own storage), so a second build reuses both.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from release import sbom
from release.version import ROOT

CACHE = Path.home() / ".cache" / "rms" / "release"
BASE_TAR = CACHE / "bookworm-base.tar"
BASE_IMAGE = "localhost/rms-debian-python:bookworm"
DEBIAN = "http://deb.debian.org/debian"
BASE_PACKAGES = "python3,python3-venv,python-is-python3,ca-certificates"
# what the bootstrapped base is made of: part of the image's cache key (release/cache.py)
BASE_INPUTS = (BASE_IMAGE, DEBIAN, BASE_PACKAGES)
SBOM_TOOL = "cyclonedx-bom>=7"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SBOM_VENV = "/opt/sbom-tool"  # in a throwaway container only
# the host's trust and pip settings (a TLS-inspecting proxy's CA, a package mirror): mounted
# read-only into the build's RUN steps, never copied into a layer
HOST_SETTINGS = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pip.conf")


@dataclass(frozen=True)
class Target:
    """One image: its name (``rms-server``) and the Dockerfile stage it is."""

    name: str
    stage: str

    def tag(self, version: str) -> str:
        return f"localhost/{self.name}:{version}"

    def archive_name(self, version: str) -> str:
        return f"{self.name}-{version}.oci.tar"


SERVER = Target("rms-server", "runtime")
REPORT = Target("rms-report", "report")
TARGETS = (SERVER, REPORT)


def tag(version: str) -> str:
    return SERVER.tag(version)


def archive_name(version: str) -> str:
    return SERVER.archive_name(version)


def _run(command: list[str], *, output: bool = False) -> str:
    """Run a command, its progress shown; its standard output returned when ``output``."""
    print(f"image: {' '.join(command)}", flush=True)
    return subprocess.run(command, check=True, text=True,
                          stdout=subprocess.PIPE if output else None).stdout or ""


def _exists(image: str) -> bool:
    return subprocess.run(["buildah", "inspect", "--type", "image", image],
                          capture_output=True, check=False).returncode == 0


def base_image() -> str:
    """The bootstrapped bookworm base, imported into buildah's storage once."""
    if _exists(BASE_IMAGE):
        return BASE_IMAGE
    if not BASE_TAR.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = BASE_TAR.with_suffix(".partial")
        _run(["mmdebstrap", "--variant=minbase", f"--include={BASE_PACKAGES}", "bookworm",
              str(partial), f"deb {DEBIAN} bookworm main", f"deb {DEBIAN} bookworm-updates main",
              f"deb {DEBIAN}-security bookworm-security main"])
        partial.rename(BASE_TAR)
    container = _run(["buildah", "from", "scratch"], output=True).strip()
    try:
        _run(["buildah", "add", container, str(BASE_TAR), "/"])
        _run(["buildah", "config", "--env", f"PATH={SYSTEM_PATH}", "--env", "LANG=C.UTF-8",
              "--cmd", "python3", container])
        _run(["buildah", "commit", "--quiet", container, BASE_IMAGE])
    finally:
        _run(["buildah", "rm", container])
    return BASE_IMAGE


def build(target: Target, version: str, dist: Path, sbom_folder: Path) -> Path:
    """Build ``target``'s stage, write it as an OCI archive and its SBOM."""
    mounts = [f"--volume={path}:{path}:ro" for path in HOST_SETTINGS if Path(path).exists()]
    _run(["buildah", "bud", "--isolation", "chroot", "--layers", *mounts, "--build-arg",
          f"PYTHON_IMAGE={base_image()}", "--target", target.stage, "--tag", target.tag(version),
          "--file", str(ROOT / "Dockerfile"), str(ROOT)])
    archive = dist / target.archive_name(version)
    _run(["buildah", "push", target.tag(version),
          f"oci-archive:{archive}:{target.name}:{version}"])
    listed = sbom.describe(json.loads(python_sbom(target.tag(version))), sbom.root(
        "container", target.name, version, f"pkg:oci/{target.name}@{version}", archive),
        absorb=False)
    listed["components"] = [*listed.get("components", []),
                            *debian_components(target.tag(version))]
    sbom.rewrite(sbom_folder / f"{target.name}-image-{version}.cdx.json", listed)
    return archive


def _in_container(image: str, script: str) -> str:
    """The standard output of ``script`` run as root in a throwaway container of ``image``."""
    container = _run(["buildah", "from", "--quiet", image], output=True).strip()
    try:
        mounts = [f"--volume={path}:{path}:ro" for path in HOST_SETTINGS if Path(path).exists()]
        return _run(["buildah", "run", "--isolation", "chroot", "--user", "0:0", *mounts,
                     container, "--", "sh", "-c", script], output=True)
    finally:
        _run(["buildah", "rm", container])


def python_sbom(image: str) -> str:
    """cyclonedx-py's SBOM of the image's Python environment (every Python package in it)."""
    return _in_container(image, (
        f"python -m venv {SBOM_VENV} && {SBOM_VENV}/bin/pip install --quiet '{SBOM_TOOL}' && "
        f"{SBOM_VENV}/bin/cyclonedx-py environment --output-format JSON /opt/rms/.venv/bin/python"))


DPKG_FORMAT = r"${Package}\t${Version}\t${Architecture}\t${source:Package}\n"


def debian_components(image: str) -> list[sbom.Json]:
    """Every Debian package installed in the image, as dpkg knows it, with its package URL."""
    listed = _in_container(image, f"dpkg-query -W -f='{DPKG_FORMAT}'")
    components: list[sbom.Json] = []
    for line in sorted(listed.splitlines()):
        name, version, architecture, source = line.split("\t")
        purl = f"pkg:deb/debian/{name}@{version}?arch={architecture}&distro=debian-12"
        component: sbom.Json = {"type": "library", "bom-ref": purl, "name": name,
                                "version": version, "purl": purl}
        if source and source != name:
            component["properties"] = [{"name": "debian:source", "value": source}]
        components.append(component)
    return components
