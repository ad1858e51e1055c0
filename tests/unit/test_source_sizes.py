"""No source file of the product or of a client over 500 lines: a file that long holds more than
one concept (the style guide's rule; nothing else would check it)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 500
SOURCES = (".py", ".java", ".ts", ".mjs", ".js", ".go", ".rs", ".sh")


def _tracked() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                            check=True).stdout
    return [ROOT / name for name in listed.decode().split("\0")
            if name.endswith(SOURCES) and not name.startswith("tests/")]


def test_no_product_or_client_source_file_is_over_500_lines() -> None:
    files = _tracked()
    assert len(files) > 100  # the listing found the sources
    too_long = {str(path.relative_to(ROOT)): count for path in files if path.exists()
                for count in (len(path.read_bytes().splitlines()),) if count > LIMIT}
    assert too_long == {}
