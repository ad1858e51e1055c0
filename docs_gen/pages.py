"""The generated pages: where each lives and what renders it; writing them and finding the
stale ones."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from docs_gen import cli_page, openapi_page, settings_page, state_machine

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

PAGES: dict[str, Callable[[], str]] = {
    "reference/http-api.md": openapi_page.render,
    "reference/cli.md": cli_page.render,
    "reference/configuration.md": settings_page.render,
    "assets/state-machine.svg": state_machine.render,
}

# generated tables inside hand-written pages: page → region name → what renders it. A region
# is the text between `<!-- docs_gen: NAME -->` and `<!-- /docs_gen: NAME -->` on lines of
# their own; the rest of the page is left as it is
REGIONS: dict[str, dict[str, Callable[[], str]]] = {
    "operations/retention.md": {"retention-settings": settings_page.retention_table},
    "operations/security.md": {"kafka-security-settings": settings_page.kafka_security_table},
}

# variables that would make a page say what this machine has set instead of the defaults
_LOCAL_PREFIXES = ("RMS_", "OTEL_")


@contextmanager
def defaults_only() -> Iterator[None]:
    """The environment without RMS's own variables while the pages render, so a default
    shows as the code defines it, whatever the shell that runs the generator has set."""
    saved = {name: value for name, value in os.environ.items()
             if name.startswith(_LOCAL_PREFIXES)}
    for name in saved:
        del os.environ[name]
    try:
        yield
    finally:
        os.environ.update(saved)


def with_regions(text: str, regions: dict[str, Callable[[], str]], where: str) -> str:
    """``text`` with each region's content rendered again."""
    for name, render in regions.items():
        start, end = f"<!-- docs_gen: {name} -->\n", f"<!-- /docs_gen: {name} -->"
        if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
            raise ValueError(f"{where} lacks the markers of the generated region {name!r}")
        before, rest = text.split(start)
        _, after = rest.split(end)
        text = f"{before}{start}{render().rstrip()}\n{end}{after}"
    return text


def rendered() -> dict[Path, str]:
    """Every generated page's current text, by its path (a page with generated regions: as
    it is, its regions rendered again)."""
    with defaults_only():
        pages = {DOCS / name: render() for name, render in PAGES.items()}
        pages |= {DOCS / name: with_regions((DOCS / name).read_text(), regions, name)
                  for name, regions in REGIONS.items()}
    return pages


def stale() -> list[Path]:
    """The pages whose checked-in text differs from what the code renders now."""
    return [path for path, text in rendered().items()
            if not path.exists() or path.read_text() != text]


def write() -> list[Path]:
    """Writes every page that changed; returns those."""
    changed = []
    for path, text in rendered().items():
        if not path.exists() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            changed.append(path)
    return changed
