"""The built site, once per session: every test of the folder reads the same build."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.system.docs.site import build


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built from docs/ in strict mode."""
    site_dir = tmp_path_factory.mktemp("site")
    result = build(site_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    return site_dir
