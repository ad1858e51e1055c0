"""The Python distributions of a release, and the files that install them by hash.

For each distribution ``name`` (``rms-server``, ``rms-client``) ``dist/`` holds, besides the
wheel and the sdist:

    <name>-<version>-requirements.txt   RMS's own wheels, pinned with their SHA-256 (pip
                                        --isolated install --no-index --no-deps --require-hashes:
                                        no index, no find-links of the environment or pip.conf)
    <name>-<version>-dependencies.txt   the third-party requirements of the wheel, none of RMS's
                                        (pip install -r ..., from the index)
    rms-server-<version>-constraints.txt  the versions the server is tested with

Neither line of the install can take a package of RMS's name from an index: the first reads
no index and accepts only the hashed files, the second names no RMS distribution. The SBOM
environment is installed by the same two lines, so the build never runs code of an index's
``rms-client``.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

from release import sbom
from release.version import ROOT

OWN = ("rms-server", "rms-client")
CONSTRAINTS = ROOT / "release" / "constraints.txt"
PIP = ("-m", "pip", "install", "--quiet", "--disable-pip-version-check")


def run(command: list[str], cwd: Path = ROOT) -> None:
    print(f"dist: {' '.join(command)}", flush=True)
    subprocess.run(command, cwd=cwd, check=True)


def wheel_name(name: str, version: str) -> str:
    return f"{name.replace('-', '_')}-{version}-py3-none-any.whl"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def own_wheels(name: str) -> tuple[str, ...]:
    """RMS's distributions ``name``'s install takes from ``dist/``: the server brings the client."""
    return OWN if name == "rms-server" else (name,)


def requirements_text(name: str, version: str, dist: Path) -> str:
    lines = [f"{own}=={version} --hash=sha256:{sha256(dist / wheel_name(own, version))}"
             for own in own_wheels(name)]
    return ("# RMS's own wheels of this release, from dist/ alone and by hash:\n"
            "#   pip --isolated install --no-index --no-deps --find-links dist/ --require-hashes \\\n"
            "#       -r <this file>\n"
            + "\n".join(lines) + "\n")


def dependencies_text(wheel: Path) -> str:
    """The wheel's ``Requires-Dist`` without extras and without RMS's own distributions."""
    info = f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info/METADATA"
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(info).decode()
    required = [line.split(":", 1)[1].strip() for line in metadata.splitlines()
                if line.startswith("Requires-Dist:")]
    kept = [line for line in required if "extra ==" not in line
            and not any(line.replace("_", "-").startswith(own) for own in OWN)]
    return ("# The third-party distributions this wheel needs (none of RMS's own), from the index:\n"
            "#   pip install -r <this file>\n" + "\n".join(kept) + "\n")


def install_files(name: str, version: str, dist: Path) -> tuple[Path, Path]:
    """Write ``name``'s requirements (by hash) and dependencies files; return both."""
    requirements = dist / f"{name}-{version}-requirements.txt"
    requirements.write_text(requirements_text(name, version, dist))
    dependencies = dist / f"{name}-{version}-dependencies.txt"
    dependencies.write_text(dependencies_text(dist / wheel_name(name, version)))
    if name == "rms-server":
        shutil.copyfile(CONSTRAINTS, dist / f"rms-server-{version}-constraints.txt")
    return requirements, dependencies


def distribution(name: str, project: Path, version: str, work: Path, dist: Path,
                 sbom_folder: Path) -> None:
    """The wheel and sdist of ``project`` (``python -m build``), its install files, and an SBOM
    of the wheel as those files install it."""
    run([sys.executable, "-m", "build", "--outdir", str(dist), str(project)])
    requirements, dependencies = install_files(name, version, dist)
    # an environment of the install alone: no pip or setuptools of its own (this build's pip
    # installs into it), so the SBOM lists what the two lines installed and nothing else
    environment = work / f"sbom-{name}"
    venv.create(environment, with_pip=False)
    python = str(environment / "bin" / "python")
    pip = [sys.executable, "-m", "pip", "--python", python, *PIP[2:]]
    report = work / f"pip-{name}.json"
    constraints = ["-c", str(CONSTRAINTS)] if name == "rms-server" else []
    run([*pip, "--report", str(report), "-r", str(dependencies), *constraints])
    run([sys.executable, "-m", "pip", "--isolated", "--python", python, *PIP[2:], "--no-index",
         "--no-deps", "--find-links", str(dist), "--require-hashes", "-r", str(requirements)])
    output = sbom_folder / f"{name}-{version}.cdx.json"
    run([sys.executable, "-m", "cyclonedx_py", "environment", "--output-format", "JSON",
         "--output-file", str(output), python])
    described = sbom.describe(sbom.load(output), sbom.root(
        "application" if name == "rms-server" else "library", name, version,
        f"pkg:pypi/{name}@{version}", dist / wheel_name(name, version)))
    hashes = sbom.pip_report_hashes(report)
    for own in own_wheels(name):
        hashes[(own, version)] = sbom.file_hashes(dist / wheel_name(own, version))
    sbom.rewrite(output, sbom.add_hashes(described, hashes))
