"""The README stays true: every command listed, the two commands named."""

from __future__ import annotations

from pathlib import Path

from rms.cli import COMMANDS

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def test_every_command_is_listed() -> None:
    for name in COMMANDS:
        if name != "bench":
            assert f"rms {name}" in README, name


def test_readme_names_the_two_commands() -> None:
    assert "make dev" in README and "make test" in README
