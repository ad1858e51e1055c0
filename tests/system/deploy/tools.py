"""What a deploy check does when the checker it runs is not installed.

`make test` installs every checker (PyPI through the test extra, Debian packages through
scripts/system-deps.sh), so in CI (``CI=true``) a missing one is a failure: a check that is
skipped there never runs anywhere. A developer's quick run without them still skips.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1"}


def checker_missing(reason: str) -> NoReturn:
    """Skip the calling test, or fail it under ``CI=true``, naming what is missing."""
    if in_ci():
        pytest.fail(f"{reason}; CI=true: `make test` must install it", pytrace=False)
    pytest.skip(reason)
