"""MkDocs hooks (mkdocs.yml ``hooks:``): pages whose Markdown lives outside ``docs/`` (the
client libraries' READMEs, the changelog) join the site under a page name of their own, and
every relative link is resolved from the file it is written in, as GitHub resolves it.

A link to a page of the site becomes a link between the site's pages (MkDocs then checks it
and its anchor); a link to another file of the repository (``deploy/``, the ``Dockerfile``,
a source file) becomes a link to that file in the repository on GitHub; a link to a file that
does not exist is a warning, which fails the strict build."""

from __future__ import annotations

import logging
import posixpath
import re
from collections.abc import Callable

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

from docs_gen.pages import ROOT

log = logging.getLogger("mkdocs.hooks.links")

# where the site's own pages are in the repository (mkdocs.yml ``docs_dir``)
DOCS_FOLDER = "docs"

# site page → its Markdown in the repository, for the pages that live outside docs/
OUTSIDE: dict[str, str] = {
    "clients/python.md": "clients/python/README.md",
    "clients/java.md": "clients/java/README.md",
    "clients/go.md": "clients/go/README.md",
    "clients/typescript.md": "clients/typescript/README.md",
    "changelog.md": "CHANGELOG.md",
}
_PAGE_OF = {source: page for page, source in OUTSIDE.items()}

_FENCE = re.compile(r"^(```|~~~)")
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_INLINE = re.compile(r"(\]\()([^)\s]+)((?:\s+\"[^\"]*\")?\))")
_DEFINITION = re.compile(r"^(\s{0,3}\[[^\]]+\]:\s+)(\S+)(.*)$")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for page, source in OUTSIDE.items():
        files.append(File.generated(config, page, abs_src_path=str(ROOT / source)))
    return files


def source_of(src_uri: str) -> str:
    """The repository path of a page's Markdown."""
    return OUTSIDE.get(src_uri, f"{DOCS_FOLDER}/{src_uri}")


def resolve(target: str, src_uri: str, repository: str) -> str | None:
    """The link ``target`` written in the page ``src_uri`` as the site needs it (None: the
    file it names does not exist)."""
    if not target or target.startswith(("#", "/")) or _SCHEME.match(target):
        return target
    path, hash_mark, anchor = target.partition("#")
    real = posixpath.normpath(posixpath.join(posixpath.dirname(source_of(src_uri)), path))
    if real.startswith(DOCS_FOLDER + "/"):
        page = real.removeprefix(DOCS_FOLDER + "/")
    elif real in _PAGE_OF:
        page = _PAGE_OF[real]
    else:
        if real.startswith("..") or not (ROOT / real).exists():
            return None
        kind = "tree" if (ROOT / real).is_dir() else "blob"
        return f"{repository}/{kind}/main/{real}{hash_mark}{anchor}"
    relative = posixpath.relpath(page, posixpath.dirname(src_uri) or ".")
    return f"{relative}{hash_mark}{anchor}"


def _rewrite_line(line: str, replace: Callable[[str], str]) -> str:
    spans = [(match.start(), match.end()) for match in _CODE_SPAN.finditer(line)]

    def outside_code(match: re.Match[str]) -> str:
        if any(start <= match.start() < end for start, end in spans):
            return match.group(0)
        return match.group(1) + replace(match.group(2)) + match.group(3)

    definition = _DEFINITION.match(line)
    if definition:
        return definition.group(1) + replace(definition.group(2)) + definition.group(3)
    return _INLINE.sub(outside_code, line)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    repository = str(config.repo_url or "").rstrip("/")

    def replace(target: str) -> str:
        found = resolve(target, page.file.src_uri, repository)
        if found is None:
            log.warning("%s links to %r, which is not a file of the repository",
                        source_of(page.file.src_uri), target)
            return target
        return found

    lines, fenced = [], False
    for line in markdown.split("\n"):
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            lines.append(line)
            continue
        lines.append(line if fenced else _rewrite_line(line, replace))
    return "\n".join(lines)
