"""The dashboard's number formatters (message_service/dashboard/static/format.js), run with
Node.js against a table of values (tests/system/dashboard/format_test.js)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_formatters_against_a_table_of_values() -> None:
    node = shutil.which("node")
    assert node is not None, "Node.js is needed for this test (Debian: apt-get install nodejs)"
    done = subprocess.run([node, str(HERE / "format_test.js")], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("passed, 0 failed")
