"""What ``make dist`` and ``make release-check`` run: a release installs its own toolchain (the
build frontend, the SBOM tool, Java, Maven, buildah, mmdebstrap) and none of the test suite's
(Chromium, Prometheus, Patroni, etcd, PySpark); ``make release-check DIST=path`` checks the
artifacts already in ``path`` without building or deleting anything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.system.release.conftest import ROOT

TEST_ONLY_PACKAGES = {"chromium", "prometheus", "patroni", "etcd-server", "shellcheck",
                      "postgresql", "libpostgresql-jdbc-java"}
# found by their files, not on PATH: a machine that has them asks for neither
FOUND_BY_FILE = {"postgresql", "libpostgresql-jdbc-java"}


def _dry_run(*arguments: str) -> str:
    """The commands ``make`` would run for ``arguments``, every target taken as out of date."""
    return subprocess.run(["make", "--no-print-directory", "-n", "-B", *arguments], cwd=ROOT,
                          check=True, capture_output=True, text=True,
                          env={**os.environ, "MAKEFLAGS": ""}).stdout


def _installed_by_system_deps(tmp_path: Path, mode: str) -> set[str]:
    """The Debian packages ``scripts/system-deps.sh mode`` asks apt-get for on a machine that
    has none of them (a PATH of stubs: apt-get records its arguments)."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    record = tmp_path / "apt-get.args"
    (stubs / "apt-get").write_text(f'#!/bin/sh\necho "$@" >> {record}\n')
    (stubs / "id").write_text("#!/bin/sh\necho 0\n")
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    subprocess.run(["/bin/bash", str(ROOT / "scripts" / "system-deps.sh"), mode], check=True,
                   env={"PATH": str(stubs)}, capture_output=True, text=True)
    words = record.read_text().split() if record.exists() else []
    return {word for word in words if not word.startswith("-") and word not in {"update", "install"}}


def test_the_release_mode_of_system_deps_installs_no_test_tool(tmp_path: Path) -> None:
    packages = _installed_by_system_deps(tmp_path, "release")
    assert {"buildah", "mmdebstrap", "maven", "openjdk-17-jdk-headless"} <= packages
    assert not packages & TEST_ONLY_PACKAGES


def test_the_test_mode_still_installs_the_whole_toolchain(tmp_path: Path) -> None:
    wanted = (TEST_ONLY_PACKAGES - FOUND_BY_FILE) | {"buildah", "mmdebstrap"}
    assert wanted <= _installed_by_system_deps(tmp_path, "test")


def test_make_dist_uses_the_release_environment_alone() -> None:
    commands = _dry_run("dist")
    assert "scripts/system-deps.sh release" in commands
    assert "build/release-venv/bin/python -m release.dist" in commands
    for unwanted in ("[test", "spark", ".venv/bin/", "system-deps.sh\n"):
        assert unwanted not in commands, (unwanted, commands)


def test_release_check_of_a_given_dist_builds_nothing(tmp_path: Path) -> None:
    held = tmp_path / "held-dist"
    commands = _dry_run("release-check", f"DIST={held}")
    assert "release.dist" not in commands
    assert f"RMS_DIST={held} .venv/bin/pytest tests/system/release" in commands


def test_release_check_without_dist_builds_the_repositorys_dist_first() -> None:
    commands = _dry_run("release-check")
    assert commands.index("-m release.dist") < commands.index(f"RMS_DIST={ROOT / 'dist'} ")


@pytest.mark.parametrize("given", ["", "elsewhere"])
def test_the_release_tests_read_the_folder_they_are_given(tmp_path: Path, given: str) -> None:
    env = {**os.environ, "RMS_DIST": str(tmp_path / given) if given else ""}
    shown = subprocess.run([sys.executable, "-c",
                            "from tests.system.release.conftest import DIST; print(DIST)"],
                           cwd=ROOT, env=env, check=True, capture_output=True, text=True).stdout
    assert shown.strip() == str(tmp_path / given if given else ROOT / "dist")
