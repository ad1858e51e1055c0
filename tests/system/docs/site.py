"""What the documentation site's tests share: a strict build of mkdocs.yml into a folder of
the test's own (optionally from another copy of docs/), and the built site served over HTTP
on the loopback."""

from __future__ import annotations

import functools
import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# mkdocs build --strict with docs_dir and site_dir given (its command line cannot set docs_dir)
_BUILD = """
import logging
import sys
from mkdocs.commands.build import build
from mkdocs.config import load_config
logging.getLogger("mkdocs").addHandler(logging.StreamHandler())
logging.getLogger("mkdocs").setLevel(logging.INFO)
build(load_config("mkdocs.yml", docs_dir=sys.argv[1], site_dir=sys.argv[2], strict=True))
"""


def build(site_dir: Path, docs_dir: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The strict build of the site into ``site_dir``; its output in ``stdout``."""
    return subprocess.run(
        [sys.executable, "-c", _BUILD, str(docs_dir or ROOT / "docs"), str(site_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1"}, check=False)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """No access log on the test's output."""


@contextmanager
def served(site_dir: Path) -> Iterator[str]:
    """The site served on a free loopback port; its base URL."""
    handler = functools.partial(_Quiet, directory=str(site_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
