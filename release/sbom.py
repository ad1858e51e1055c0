"""What every SBOM of ``dist/sbom/`` says beyond its ecosystem tool's output: the artifact
itself as ``metadata.component`` (its name, release, package URL and the SHA-256 of the file
``dist/`` holds), and the hashes of the components the build installed.

The tools leave these out or get them wrong where the build runs: ``cyclonedx-py environment``
names no root, ``npm sbom`` names the root after the folder (``typescript``), and
``cyclonedx-gomod`` gives the module a pseudo-version while the repository has no tag.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

Json = dict[str, Any]


def file_hashes(path: Path) -> list[Json]:
    """CycloneDX hashes of one file: SHA-256 and SHA-512."""
    data = path.read_bytes()
    return [{"alg": "SHA-256", "content": hashlib.sha256(data).hexdigest()},
            {"alg": "SHA-512", "content": hashlib.sha512(data).hexdigest()}]


def root(kind: str, name: str, version: str, purl: str, artifact: Path | None = None,
         group: str | None = None) -> Json:
    """A ``metadata.component``: ``kind`` is CycloneDX's type (``application``, ``library``,
    ``container``)."""
    component: Json = {"type": kind, "bom-ref": purl, "name": name, "version": version,
                       "purl": purl, "licenses": [{"license": {"id": "Apache-2.0"}}]}
    if group:
        component["group"] = group
    if artifact is not None:
        component["hashes"] = file_hashes(artifact)
    return component


def describe(sbom: Json, component: Json, absorb: bool = True) -> Json:
    """``sbom`` with ``component`` as its subject. The tool's own root and, with ``absorb``, any
    listed component that is the subject itself (same name and version: the installed wheel
    the SBOM describes) give way to it: references to them point at the new root. An image
    keeps the Python package of its name as a component of its own (``absorb=False``)."""
    metadata = sbom.setdefault("metadata", {})
    replaced = {ref for ref in [(metadata.get("component") or {}).get("bom-ref")] if ref}
    if absorb:
        replaced |= {entry["bom-ref"] for entry in sbom.get("components", [])
                     if "bom-ref" in entry and entry.get("version") == component["version"]
                     and normalized(entry.get("name", "")) == normalized(component["name"])}
    metadata["component"] = component
    ref = component["bom-ref"]
    sbom["components"] = [entry for entry in sbom.get("components", [])
                          if entry.get("bom-ref") not in replaced]
    merged: dict[str, list[str]] = {}
    for dependency in sbom.get("dependencies", []):
        own = ref if dependency.get("ref") in replaced else dependency.get("ref")
        targets = merged.setdefault(own, [])
        for target in dependency.get("dependsOn", []):
            target = ref if target in replaced else target
            if target not in targets and target != own:
                targets.append(target)
    if "dependencies" in sbom:
        sbom["dependencies"] = [{"ref": own, "dependsOn": targets} for own, targets in merged.items()]
    return sbom


def add_hashes(sbom: Json, hashes: Mapping[tuple[str, str], Iterable[Json]]) -> Json:
    """Hashes of components by (normalized name, version), as a package installer saw them."""
    for component in sbom.get("components", []):
        found = hashes.get((normalized(component.get("name", "")), component.get("version", "")))
        if found and not component.get("hashes"):
            component["hashes"] = list(found)
    return sbom


def normalized(name: str) -> str:
    """A Python distribution name as PEP 503 compares it."""
    return "-".join(part for part in name.lower().replace("_", "-").replace(".", "-").split("-")
                    if part)


def pip_report_hashes(report: Path) -> dict[tuple[str, str], list[Json]]:
    """The hashes of what ``pip install --report`` installed, by name and version."""
    names = {"sha256": "SHA-256", "sha384": "SHA-384", "sha512": "SHA-512"}
    found: dict[tuple[str, str], list[Json]] = {}
    for item in json.loads(report.read_text()).get("install", []):
        metadata = item.get("metadata", {})
        archive = (item.get("download_info") or {}).get("archive_info") or {}
        digests = dict(archive.get("hashes") or {})
        if not digests and "=" in archive.get("hash", ""):
            algorithm, value = archive["hash"].split("=", 1)
            digests[algorithm] = value
        entries = [{"alg": names[alg], "content": value} for alg, value in sorted(digests.items())
                   if alg in names]
        if entries:
            found[(normalized(metadata.get("name", "")), metadata.get("version", ""))] = entries
    return found


def rewrite(path: Path, change: Json) -> None:
    """Write ``change`` (the SBOM, edited) back to ``path``."""
    path.write_text(json.dumps(change, indent=2) + "\n")


def load(path: Path) -> Json:
    return dict(json.loads(path.read_text()))
