"""One release number: the repository's VERSION, repeated in every manifest and client constant
(release/version.py keeps the copies), shown by ``rms --version`` and the OpenAPI document, and
one Apache-2.0 licence beside every package."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from release import version
from tests.support import Api

ROOT = Path(__file__).resolve().parents[3]
LICENSED = ("clients/python", "clients/typescript", "clients/go",
            "clients/java/src/main/resources/META-INF")


def test_every_copy_of_the_version_is_the_release() -> None:
    assert version.release() == (ROOT / "VERSION").read_text().strip()
    assert version.mismatches() == []


def test_a_copy_that_drifts_is_named(tmp_path: Path) -> None:
    for copy in {c.path for c in version.COPIES} | {"VERSION"}:
        (tmp_path / copy).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / copy, tmp_path / copy)
    pom = tmp_path / "clients/java/pom.xml"
    pom.write_text(pom.read_text().replace(f"<tag>v{version.release()}</tag>", "<tag>v9.9.9</tag>"))
    (tmp_path / "clients/go/version.go").write_text("package rms\n")
    assert version.mismatches(tmp_path) == [
        f"clients/java/pom.xml: ['9.9.9'] where VERSION says {version.release()!r}",
        f"clients/go/version.go: [] where VERSION says {version.release()!r}"]


def test_rms_version_prints_the_release() -> None:
    shown = subprocess.run([sys.executable, "-m", "rms.cli", "--version"], capture_output=True,
                           text=True, check=True, timeout=60)
    assert shown.stdout.strip() == f"rms {version.release()}"


async def test_the_openapi_document_carries_the_release(api: Api) -> None:
    document = (await api.client.get("/openapi.json")).json()
    assert document["info"]["version"] == version.release()


@pytest.mark.parametrize("folder", LICENSED)
def test_each_package_ships_the_root_licence_and_notice(folder: str) -> None:
    for name in ("LICENSE", "NOTICE"):
        assert (ROOT / folder / name).read_bytes() == (ROOT / name).read_bytes(), f"{folder}/{name}"
