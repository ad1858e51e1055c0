"""The editable install (what ``make dev`` and ``make test`` run) is quiet: no setuptools
warning spread over many lines, and the checkout's packages import from anywhere."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.timeout(420)
def test_the_editable_install_prints_nothing(tmp_path: Path) -> None:
    venv.create(tmp_path / "venv", with_pip=False)
    python = tmp_path / "venv" / "bin" / "python"
    # this environment's pip (the one the Makefile upgrades), installing into the new one
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--disable-pip-version-check", "--no-deps", "-e", str(ROOT)],
        capture_output=True, text=True, check=False, timeout=400, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr[-3000:]
    assert installed.stdout + installed.stderr == ""
    found = subprocess.run(
        [str(python), "-c", "import rms, message_service, spark, history; print(rms.__file__)"],
        capture_output=True, text=True, check=False, timeout=60, cwd=tmp_path)
    assert found.stdout.strip() == str(ROOT / "rms" / "__init__.py"), found.stderr
