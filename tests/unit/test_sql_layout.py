"""The golden files' layout changes whitespace only: each laid out statement is the statement
rendered, token for token (whitespace outside literals aside), and laying it out again changes
nothing; the clauses and conditions are one per line."""

from __future__ import annotations

import re

import pytest

from rms.store import golden
from rms.store.sql_layout import layout

_TOKENS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\S")


def _tokens(sql: str) -> list[str]:
    return _TOKENS.findall(sql)


@pytest.mark.parametrize("name", sorted(golden.STATEMENTS))
def test_the_layout_is_the_same_statement(name: str) -> None:
    sql = golden.STATEMENTS[name]()
    laid_out = layout(sql)
    assert _tokens(laid_out) == _tokens(sql)
    assert layout(laid_out) == laid_out


def test_clauses_and_conditions_go_one_per_line_and_literals_are_kept() -> None:
    sql = ("UPDATE messages m SET a = 1, b = 'x,  WHERE y' FROM input u "
           "WHERE m.id = u.id AND m.state = 'sent' RETURNING m.id, extract(epoch FROM now())")
    assert layout(sql) == (
        "UPDATE messages m\n"
        "SET a = 1,\n"
        "    b = 'x,  WHERE y'\n"
        "FROM input u\n"
        "WHERE m.id = u.id\n"
        "    AND m.state = 'sent'\n"
        "RETURNING m.id,\n"
        "    extract(epoch FROM now())\n")
