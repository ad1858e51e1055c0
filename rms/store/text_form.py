"""The SQL text of the store's Core expressions, for its constant text statements (the coalesced
request path, the transactions' and the subscription's statements).

A condition or an effect is written once, in Core (:func:`rms.store.phase.condition`,
:func:`rms.store.transitions.core_values`); its text is that expression compiled by the asyncpg
dialect with literal binds. In a text statement the row is a table alias or a CTE the statement
names (``m.``, ``t.``, ``f.``, or no prefix at all), so the expression is built on a
:class:`Prefixed` row, whose columns are that text: nothing is added to a ``FROM`` list.
"""

from __future__ import annotations

from typing import Any, Protocol

from sqlalchemy import ColumnElement, literal_column, null
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect
from sqlalchemy.sql import ClauseElement, operators
from sqlalchemy.sql.elements import literal

_DIALECT = asyncpg_dialect()  # type: ignore[no-untyped-call]


class Columns(Protocol):
    """A row's columns by name: ``row.c.acks`` or ``row.c["acks"]``."""

    def __getitem__(self, name: str) -> ColumnElement[Any]: ...

    def __getattr__(self, name: str) -> ColumnElement[Any]: ...


class Row(Protocol):
    """What a condition or an effect reads of the row it is about: its columns. A table, an
    alias, a CTE, or a :class:`Prefixed` row of a text statement."""

    @property
    def c(self) -> Columns: ...


class _PrefixedColumns:
    def __init__(self, prefix: str) -> None:
        self._prefix = prefix

    def __getitem__(self, name: str) -> ColumnElement[Any]:
        return literal_column(f"{self._prefix}{name}")

    def __getattr__(self, name: str) -> ColumnElement[Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        return self[name]


class Prefixed:
    """The row of a text statement: each column is ``<prefix><name>`` (``prefix`` ``"m."``, or
    ``""`` for a statement over one unaliased source)."""

    def __init__(self, prefix: str) -> None:
        self.c = _PrefixedColumns(prefix)


def given_text(given: dict[str, str] | None) -> dict[str, ColumnElement[Any]]:
    """The text of each given value (``"$1::text"``, ``"u.consumer"``) as a Core expression."""
    return {name: literal_column(sql) for name, sql in (given or {}).items()}


def expression(value: Any) -> ClauseElement:
    """A Core expression, or a constant (``None``, a bool, an int, a str) as its literal."""
    if isinstance(value, ClauseElement):
        return value
    return null() if value is None else literal(value)


def text_of(value: Any) -> str:
    """``value`` (an expression or a constant) as SQL text, grouped in parentheses where a
    statement's ``AND`` around it would bind tighter than its own operator."""
    element = expression(value)
    if isinstance(element, ColumnElement):
        element = element.self_group(against=operators.and_)
    return str(element.compile(dialect=_DIALECT, compile_kwargs={"literal_binds": True}))
