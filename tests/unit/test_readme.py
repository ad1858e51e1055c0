"""The README stays true: every setting is in its configuration table, every command listed."""

from __future__ import annotations

import re
from pathlib import Path

from rms.cli import COMMANDS
from rms.config import Settings

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_every_setting_is_documented_with_its_default() -> None:
    rows = dict(re.findall(r"^\| `(RMS_[A-Z_]+)` \| ([^|]+) \|", README, flags=re.M))
    expected = {f"RMS_{name.upper()}" for name in Settings.model_fields}
    assert set(rows) == expected
    for name, field in Settings.model_fields.items():
        documented = rows[f"RMS_{name.upper()}"].strip().strip("`")
        if field.default is None:
            assert documented == "(none)"
        else:
            default = str(field.default).lower() if isinstance(field.default, bool) else field.default
            assert documented in {str(default), f"{default:g}" if isinstance(default, float) else ""}, name


def test_every_command_is_listed() -> None:
    for name in COMMANDS:
        if name != "bench":
            assert f"rms {name}" in README, name


def test_readme_names_the_two_commands() -> None:
    assert "make dev" in README and "make test" in README
