"""The repository's ``VERSION`` file is the one source of the release number; every manifest
and every client's ``User-Agent`` constant carries a copy, which this module writes and checks.

    python -m release.version           exit 1, naming each copy that differs from VERSION
    python -m release.version --write   write VERSION into every copy
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Copy:
    """Places that repeat the version: a file and a pattern whose first group is it (every
    match counts)."""

    path: str
    pattern: str

    def found(self, root: Path) -> set[str]:
        """The versions this copy holds (empty when the pattern no longer matches)."""
        return {match.group(1) for match in re.finditer(self.pattern, (root / self.path).read_text(),
                                                         re.MULTILINE)}

    def write(self, root: Path, version: str) -> None:
        file = root / self.path
        text = file.read_text()
        if not self.found(root):
            raise SystemExit(f"release.version: {self.path}: no version matches {self.pattern!r}")
        file.write_text(re.sub(self.pattern, lambda match: _replaced(match, version), text,
                               flags=re.MULTILINE))


def _replaced(match: re.Match[str], version: str) -> str:
    start, end = match.start(1) - match.start(), match.end(1) - match.start()
    return match.group()[:start] + version + match.group()[end:]


COPIES = (
    Copy("pyproject.toml", r'^version = "([^"]+)"'),
    Copy("pyproject.toml", r'"rms-client==([^"]+)"'),
    Copy("rms/__init__.py", r'^__version__ = "([^"]+)"'),
    Copy("clients/python/pyproject.toml", r'^version = "([^"]+)"'),
    Copy("clients/python/rms_client/version.py", r'^__version__ = "([^"]+)"'),
    Copy("clients/java/pom.xml", r"<artifactId>rms-client</artifactId>\s*<version>([^<]+)</version>"),
    Copy("clients/java/pom.xml", r"<tag>v([^<]+)</tag>"),
    Copy("clients/java/pom.xml", r"/tree/v([^/]+)/clients/java"),
    Copy("clients/typescript/package.json", r'^  "version": "([^"]+)"'),
    Copy("clients/typescript/package-lock.json", r'^  "version": "([^"]+)"'),
    Copy("clients/typescript/package-lock.json",
         r'^    "": \{\n      "name": "[^"]+",\n      "version": "([^"]+)"'),
    Copy("clients/typescript/src/version.ts", r'^export const VERSION = "([^"]+)"'),
    Copy("clients/go/version.go", r'^const Version = "([^"]+)"'),
    Copy("Dockerfile", r"^ARG RELEASE_VERSION=(\S+)"),
    Copy("deploy/k8s/overlays/production/kustomization.yaml", r"^    newTag: (\S+)"),
    Copy("deploy/k8s/overlays/staging/kustomization.yaml", r"^    newTag: (\S+)"),
)


def release(root: Path = ROOT) -> str:
    """The version in ``VERSION``."""
    return (root / "VERSION").read_text().strip()


def mismatches(root: Path = ROOT) -> list[str]:
    """One line per copy that does not repeat ``VERSION``."""
    version = release(root)
    return [f"{copy.path}: {sorted(copy.found(root))} where VERSION says {version!r}"
            for copy in COPIES if copy.found(root) != {version}]


def main(arguments: list[str]) -> int:
    if arguments == ["--write"]:
        for copy in COPIES:
            copy.write(ROOT, release())
        return 0
    if arguments:
        print("usage: python -m release.version [--write]", file=sys.stderr)
        return 2
    wrong = mismatches()
    for line in wrong:
        print(f"release.version: {line}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
