"""Release artifacts cached by what goes into them.

Each artifact of ``make dist`` is built by one step from a known set of inputs: folders of
the repository (every file git tracks there, or would track, read as it is on disk), the
release number and the build recipe itself (``release/``). The step's key is a SHA-256 of
their contents; what the step wrote into ``dist/`` is kept under
``~/.cache/rms/dist/<artifact>/<key>/`` (``RMS_DIST_CACHE`` to move it). An artifact whose key
is cached is copied from there instead of being built again, so an unchanged image, jar or
module costs a copy, and a change to one client rebuilds that client alone.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from release.version import ROOT

CACHE = Path(os.environ.get("RMS_DIST_CACHE") or Path.home() / ".cache" / "rms" / "dist")
RECIPE = ("release",)  # a change to how artifacts are built rebuilds every one of them
KEPT = 3  # keys kept per artifact (the newest), so the cache does not grow without bound


def tracked_files(folders: Iterable[str], root: Path = ROOT) -> list[Path]:
    """The files under ``folders`` that git tracks or would track (not ignored), sorted; a
    tracked file deleted on disk is left out."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *folders],
        cwd=root, check=True, capture_output=True).stdout.decode()
    return sorted({root / name for name in listed.split("\0") if name and (root / name).is_file()})


def key_of(name: str, folders: Iterable[str], extra: Iterable[str] = (),
           root: Path = ROOT) -> str:
    """The key of artifact ``name``: its inputs' paths and contents, the recipe's, and
    ``extra`` (the release number, a base image, tool versions)."""
    digest = hashlib.sha256(name.encode())
    for value in extra:
        digest.update(b"\0extra\0" + value.encode())
    for path in tracked_files([*folders, *RECIPE], root):
        digest.update(b"\0" + path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:32]


@dataclass(frozen=True)
class Step:
    """One artifact: its name, the folders it is built from and ``extra`` key parts."""

    name: str
    folders: tuple[str, ...]
    extra: tuple[str, ...] = ()

    def key(self) -> str:
        return key_of(self.name, self.folders, self.extra)


def produce(step: Step, dist: Path, build: Callable[[], object]) -> bool:
    """Make ``step``'s files in ``dist``: copied from the cache when its key is there, else
    built by ``build`` (which writes into ``dist``) and then cached. Returns whether it was
    built."""
    entry = CACHE / step.name / step.key()
    if (entry / ".complete").exists():
        print(f"dist: {step.name}: unchanged, from the cache ({entry})", flush=True)
        _copy_tree(entry, dist)
        os.utime(entry)
        return False
    before = _files(dist)
    build()
    made = sorted(_files(dist) - before)
    partial = entry.with_name(entry.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    for relative in made:
        target = partial / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(dist / relative, target)
    (partial / ".complete").write_text("\n".join(str(path) for path in made) + "\n")
    shutil.rmtree(entry, ignore_errors=True)
    partial.rename(entry)
    _prune(entry.parent)
    return True


def _files(folder: Path) -> set[Path]:
    return {path.relative_to(folder) for path in folder.rglob("*") if path.is_file()}


def _copy_tree(source: Path, dist: Path) -> None:
    for relative in sorted(_files(source)):
        if relative.name == ".complete":
            continue
        target = dist / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / relative, target)


def _prune(folder: Path) -> None:
    """Keep the newest :data:`KEPT` complete keys of one artifact."""
    entries = sorted((path for path in folder.iterdir() if (path / ".complete").exists()),
                     key=lambda path: path.stat().st_mtime, reverse=True)
    for stale in entries[KEPT:]:
        shutil.rmtree(stale, ignore_errors=True)
