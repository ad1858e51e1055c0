"""The README is the short first page: at most 250 lines, every link and picture in it
resolves (a file of the repository, and a heading of it when the link names one), and it
names the two commands. What it says at length lives on the documentation site."""

from __future__ import annotations

import re
from pathlib import Path

from pymdownx.slugs import slugify

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
# the heading ids GitHub and the site give (mkdocs.yml's toc slugify)
SLUG = slugify(case="lower")


def anchors(markdown: Path) -> set[str]:
    """The ids of a Markdown file's headings (an explicit ``{#id}`` wins)."""
    found = set()
    for heading in HEADING.findall(FENCE.sub("", markdown.read_text())):
        explicit = re.search(r"\{#([^}]+)\}$", heading)
        found.add(explicit.group(1) if explicit else SLUG(heading, "-"))
    return found


def test_the_readme_is_at_most_250_lines() -> None:
    assert len(README.splitlines()) <= 250


def test_every_link_of_the_readme_resolves() -> None:
    links = [link for link in LINK.findall(FENCE.sub("", README))
             if not re.match(r"^[a-z]+:", link)]
    assert len(links) > 20
    for link in links:
        path, _, anchor = link.partition("#")
        target = ROOT / path if path else ROOT / "README.md"
        assert target.exists(), link
        if anchor:
            assert anchor in anchors(target), link


def test_the_link_check_sees_a_missing_heading() -> None:
    assert "a-five-minute-walkthrough" in anchors(ROOT / "docs" / "getting-started.md")
    assert "no-such-heading" not in anchors(ROOT / "docs" / "getting-started.md")


def test_readme_names_the_two_commands() -> None:
    assert "make dev" in README and "make test" in README
