"""The server's tested dependencies: ``release/constraints.txt`` pins every third-party
distribution ``rms-server`` needs at run time (its requirements and theirs, extras included,
on Linux and CPython 3.11) to the version the suite runs with. ``make install`` installs the
test environment under it, the image and ``make dist``'s SBOM environment install under it,
and the release ships it as ``dist/rms-server-<version>-constraints.txt``.

    python -m release.constraints           exit 1, naming each pin the environment differs from
    python -m release.constraints --write   pin what this environment holds
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from release.version import ROOT

FILE = ROOT / "release" / "constraints.txt"
OWN = {"rms-server", "rms-client"}
HEADER = ("# The third-party distributions rms-server runs with, at the versions its tests run\n"
          "# with (Linux, CPython 3.11): python -m release.constraints --write\n")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(top: str = "rms-server") -> dict[str, str]:
    """Every distribution installed for ``top`` (not RMS's own), by name: its version here."""
    found: dict[str, str] = {}
    pending: list[tuple[str, frozenset[str]]] = [(top, frozenset())]
    seen: set[tuple[str, frozenset[str]]] = set()
    while pending:
        name, extras = pending.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        distribution = metadata.distribution(name)
        if name not in OWN:
            found[_canonical(distribution.metadata["Name"])] = distribution.version
        for line in distribution.requires or []:
            requirement = Requirement(line)
            wanted = [{"extra": extra} for extra in extras] or [{"extra": ""}]
            if requirement.marker and not any(requirement.marker.evaluate(env) for env in wanted):
                continue
            pending.append((_canonical(requirement.name), frozenset(requirement.extras)))
    return dict(sorted(found.items()))


def text(pins: dict[str, str]) -> str:
    return HEADER + "".join(f"{name}=={version}\n" for name, version in pins.items())


def read(path: Path = FILE) -> dict[str, str]:
    """The pins of a constraints file, by name."""
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==", 1)
            pins[_canonical(name)] = version
    return pins


def differences(path: Path = FILE) -> list[str]:
    """One line per distribution whose installed version is not its pin, or is not pinned."""
    pinned, installed = read(path), closure()
    return [f"{name}: installed {installed.get(name)}, pinned {pinned.get(name)}"
            for name in sorted(set(pinned) | set(installed)) if pinned.get(name) != installed.get(name)]


def main(arguments: list[str]) -> int:
    if arguments == ["--write"]:
        FILE.write_text(text(closure()))
        return 0
    if arguments:
        print("usage: python -m release.constraints [--write]", file=sys.stderr)
        return 2
    wrong = differences()
    for line in wrong:
        print(f"release.constraints: {line}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
