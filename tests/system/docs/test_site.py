"""The documentation site builds in strict mode with every page of the nav, and the strict
build fails on a broken link, a missing page and an unknown anchor."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.system.docs.site import ROOT, build

pytestmark = pytest.mark.slow


def _nav_pages(entries: object) -> list[str]:
    """The Markdown pages the nav of mkdocs.yml names."""
    if isinstance(entries, str):
        return [entries]
    if isinstance(entries, list):
        return [page for entry in entries for page in _nav_pages(entry)]
    if isinstance(entries, dict):
        return [page for value in entries.values() for page in _nav_pages(value)]
    return []


def _nav() -> list[str]:
    text = (ROOT / "mkdocs.yml").read_text()
    nav = text[text.index("\nnav:"):]  # the part a plain YAML loader reads (no python tags)
    return _nav_pages(yaml.safe_load(nav)["nav"])


def test_every_page_of_the_nav_is_built(site: Path) -> None:
    pages = _nav()
    assert {"index.md", "getting-started.md", "concepts/state-machine.md",
            "concepts/subscribers.md", "concepts/transactions.md", "concepts/ordering.md",
            "concepts/delays.md", "concepts/retention.md", "reference/http-api.md",
            "reference/cli.md", "reference/configuration.md", "design.md",
            "operations/index.md", "clients/python.md", "clients/java.md", "clients/go.md",
            "clients/typescript.md", "performance.md", "security.md", "changelog.md"} <= set(pages)
    for page in pages:
        built = site / ("index.html" if page == "index.md" else
                        page.removesuffix(".md").removesuffix("/index") + "/index.html")
        assert built.is_file(), page
    assert (site / "assets" / "state-machine.svg").is_file()
    walkthrough = (site / "getting-started" / "index.html").read_text()
    assert "order-1-paid" in walkthrough and "--8&lt;--" not in walkthrough  # included


BROKEN = {
    "[a missing anchor](reference/cli.md#rms-no-such-command)":
        "does not contain an anchor '#rms-no-such-command'",
    "[a missing page](no-such-page.md)": "'no-such-page.md', but the target is not found",
    "[a missing file](../no/such/file.py)": "which is not a file of the repository",
}


def test_the_strict_build_fails_on_broken_links_and_a_page_missing_from_the_nav(
        tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    with (docs / "index.md").open("a") as page:
        page.write("\n" + "\n".join(BROKEN) + "\n")
    (docs / "orphan.md").write_text("# A page no one can reach\n")
    result = build(tmp_path / "site", docs)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    for complaint in BROKEN.values():
        assert complaint in output
    assert "orphan.md" in output
