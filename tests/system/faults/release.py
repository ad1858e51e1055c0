"""The previous release, as its operators run it: its own tree, taken from this repository's
history by commit, installed into its own virtual environment.

The tree and the environment are cached under ``~/.cache/rms/release-<commit>/`` (built once,
behind a lock, so concurrent test runs share one build). The release is installed from its own
tree only: its distributions carry the names and versions of that release, which need not be
this one's.
"""

from __future__ import annotations

import fcntl
import io
import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

PREVIOUS_RELEASE = "286319b0ad3610595b0bf872fb6b3a97821b300e"  # v0.1.0
REPOSITORY = Path(__file__).resolve().parents[3]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rms"
BUILD_SECONDS = 900.0


class ReleaseMissing(RuntimeError):
    """The previous release's commit is not in this clone's history, or would not install."""


@dataclass(frozen=True)
class Release:
    commit: str
    tree: Path  # its source, as ``git archive`` gives it
    venv: Path  # its own virtual environment

    @property
    def rms(self) -> Path:
        """Its ``rms`` command (a console script: it imports the release's own package,
        whatever the working directory)."""
        return self.venv / "bin" / "rms"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


def previous_release(commit: str = PREVIOUS_RELEASE) -> Release:
    """The release at ``commit``, built on first use."""
    home = CACHE / f"release-{commit}"
    release = Release(commit, home / "tree", home / "venv")
    home.mkdir(parents=True, exist_ok=True)
    with (home / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (home / ".built").exists():
            _build(release)
            (home / ".built").touch()
    return release


def _build(release: Release) -> None:
    shutil.rmtree(release.tree, ignore_errors=True)
    shutil.rmtree(release.venv, ignore_errors=True)
    _extract(release.commit, release.tree)
    subprocess.run([sys.executable, "-m", "venv", str(release.venv)], check=True)
    installed = subprocess.run(
        [str(release.python), "-m", "pip", "install", "--quiet",
         str(release.tree / "clients" / "python"), f"{release.tree}[test,dev-stack]"],
        capture_output=True, text=True, timeout=BUILD_SECONDS, check=False)
    if installed.returncode != 0:
        raise ReleaseMissing(f"the release {release.commit[:12]} would not install: "
                             f"{installed.stderr.strip()[-2000:]}")


def _extract(commit: str, tree: Path) -> None:
    archive = subprocess.run(["git", "-C", str(REPOSITORY), "archive", "--format=tar", commit],
                             capture_output=True, check=False)
    if archive.returncode != 0:
        raise ReleaseMissing(
            f"commit {commit[:12]} (the previous release) is not in this clone's history: "
            f"clone without --depth (or run `git fetch --unshallow`)")
    tree.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(tree, filter="data")
