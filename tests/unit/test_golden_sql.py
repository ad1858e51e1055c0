"""The checked-in SQL of every fixed statement (``rms/store/sql``) is what the store runs: a
change to a statement, or to a transition it is rendered from, shows in review as a change of
these files (write them again with ``python -m rms.store.golden``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rms.store import golden


@pytest.mark.parametrize("name", sorted(golden.rendered()))
def test_the_checked_in_sql_is_what_the_store_renders(name: str) -> None:
    checked_in = golden.SQL_DIR / name
    assert checked_in.is_file(), f"{name} is missing: run python -m rms.store.golden"
    assert checked_in.read_text(encoding="utf-8") == golden.rendered()[name], (
        f"{name} differs from the statement the store renders: review the change, then run "
        "python -m rms.store.golden")


def test_no_file_of_a_statement_that_is_gone() -> None:
    assert {path.name for path in golden.SQL_DIR.glob("*.sql")} == set(golden.rendered())


def test_rendering_twice_gives_the_same_text(tmp_path: Path) -> None:
    first = golden.write(tmp_path)
    assert first == sorted(golden.rendered())
    assert {p.name: p.read_text(encoding="utf-8") for p in tmp_path.glob("*.sql")} == (
        golden.rendered())
